// Tests of the `.umt` trace format: round trips, limits, and that damaged or
// cut-off files fail with a one-line error instead of crashing. The suite
// also runs under ASan and UBSan, which turn any out-of-bounds read in the
// reader into a failure here.
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/event.h"
#include "core/trace_codec.h"
#include "core/trace_format.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// The largest single C++ allocation since the last reset, so a test can show
// that a header claiming a 4 GiB chunk is refused before anything that size
// is allocated. Every non-aligned form of new and delete is replaced so that
// allocations and frees always pair up (ASan checks that they do). They are
// not inlined: GCC would otherwise see free() of operator new's memory at
// each call site and warn (-Wmismatched-new-delete).
namespace {
std::atomic<size_t> largest_allocation{0};

void* CountedAllocate(size_t size) {
  size_t seen = largest_allocation.load(std::memory_order_relaxed);
  while (size > seen &&
         !largest_allocation.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
  return std::malloc(size == 0 ? 1 : size);
}
}  // namespace

#define UMLAB_NOINLINE __attribute__((noinline))
UMLAB_NOINLINE void* operator new(size_t size) {
  void* memory = CountedAllocate(size);
  if (memory == nullptr) std::abort();
  return memory;
}
UMLAB_NOINLINE void* operator new[](size_t size) { return operator new(size); }
UMLAB_NOINLINE void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return CountedAllocate(size);
}
UMLAB_NOINLINE void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return CountedAllocate(size);
}
UMLAB_NOINLINE void operator delete(void* memory) noexcept { std::free(memory); }
UMLAB_NOINLINE void operator delete[](void* memory) noexcept { std::free(memory); }
UMLAB_NOINLINE void operator delete(void* memory, size_t) noexcept { std::free(memory); }
UMLAB_NOINLINE void operator delete[](void* memory, size_t) noexcept { std::free(memory); }
UMLAB_NOINLINE void operator delete(void* memory, const std::nothrow_t&) noexcept {
  std::free(memory);
}
UMLAB_NOINLINE void operator delete[](void* memory, const std::nothrow_t&) noexcept {
  std::free(memory);
}
#undef UMLAB_NOINLINE

namespace umlab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Metadata = std::vector<std::pair<std::string, std::string>>;

// A path unique to this test and process, so parallel ctest runs never share one.
std::string TempPath(absl::string_view suffix) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(::testing::TempDir(), "/umlab_", info->test_suite_name(), "_", info->name(),
                      "_", ::getpid(), "_", suffix);
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

void WriteFile(const std::string& path, absl::string_view bytes) {
  // Unlink first: ext4 flushes a file that is truncated and rewritten when it
  // is closed (auto_da_alloc), which made thousands of rewrites take seconds.
  std::remove(path.c_str());
  std::FILE* file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  ASSERT_EQ(std::fclose(file), 0);
}

std::string ReadFile(const std::string& path) {
  std::string bytes;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return bytes;
  char buffer[4096];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0) bytes.append(buffer, count);
  std::fclose(file);
  return bytes;
}

// Walks the frames of a well-formed trace and counts its chunks.
size_t CountChunks(const std::string& bytes) {
  size_t offset = kFileHeaderBytes + trace_internal::LoadFixed32(bytes.data() + 12);
  size_t chunks = 0;
  while (offset + kChunkHeaderBytes <= bytes.size() &&
         bytes.compare(offset, sizeof(kChunkTag), kChunkTag, sizeof(kChunkTag)) == 0) {
    offset += kChunkHeaderBytes + trace_internal::LoadFixed32(bytes.data() + offset + 4);
    ++chunks;
  }
  EXPECT_EQ(bytes.compare(offset, sizeof(kEndTag), kEndTag, sizeof(kEndTag)), 0);
  return chunks;
}

// Everything a trace file yields: Open's error, or the events and the status
// after the last Next().
struct ReadResult {
  absl::Status status;
  Metadata metadata;
  std::vector<Event> events;
};

ReadResult ReadTrace(const std::string& path) {
  ReadResult result;
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) {
    result.status = reader.status();
    return result;
  }
  result.metadata = (*reader)->metadata();
  Event event;
  while ((*reader)->Next(event)) result.events.push_back(event);
  // Once done, a reader stays done.
  EXPECT_FALSE((*reader)->Next(event));
  result.status = (*reader)->status();
  return result;
}

void WriteTrace(const std::string& path, const Metadata& metadata,
                const std::vector<Event>& events, TraceWriterOptions options = {}) {
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer =
      TraceWriter::Create(path, metadata, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const Event& event : events) ASSERT_TRUE((*writer)->Append(event).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

Event MakeEvent(EventKind kind) {
  Event event;
  event.kind = kind;
  return event;
}

// One event of every kind, each field at 0, 1 or its maximum, plus names
// with bytes that a text format would mangle.
std::vector<Event> EdgeEvents() {
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  constexpr Nanos kMaxNanos = std::numeric_limits<Nanos>::max();
  std::vector<Event> events;

  Event e = MakeEvent(EventKind::kIterationBegin);
  events.push_back(e);  // every field zero
  e.iteration = kMax64;
  events.push_back(e);
  e.iteration = 1;
  e.time_ns = kMaxNanos;
  events.push_back(e);

  for (EventKind kind : {EventKind::kAlloc, EventKind::kFree, EventKind::kActivate,
                         EventKind::kDeactivate, EventKind::kMigrate, EventKind::kEvict,
                         EventKind::kInvalidate}) {
    e = MakeEvent(kind);
    e.address = kMax64;
    e.size = kMax64;
    events.push_back(e);
    e.address = 0;  // the largest backward delta
    e.size = 1;
    e.time_ns = 1;
    events.push_back(e);
    e.address = kBlockSize;
    e.time_ns = 0;  // a backward time delta
    e.cause = kind == EventKind::kMigrate ? 1 : 0;
    events.push_back(e);
  }

  e = MakeEvent(EventKind::kKernelDefine);
  e.exec_id = kMax32;
  e.name = "k";
  events.push_back(e);
  e.exec_id = 0;
  e.name = std::string(kMaxKernelNameBytes, 'x');
  events.push_back(e);
  e.exec_id = 7;
  static constexpr char kAwkwardName[] = "nul\0byte\n\xff\x80 name";
  e.name = std::string(kAwkwardName, sizeof(kAwkwardName) - 1);
  events.push_back(e);

  e = MakeEvent(EventKind::kKernelBegin);
  e.exec_id = kMax32;
  e.duration_ns = kMaxNanos;
  e.time_ns = kMaxNanos;
  events.push_back(e);
  e.exec_id = 0;
  e.duration_ns = 0;
  e.time_ns = 0;
  events.push_back(e);

  e = MakeEvent(EventKind::kAccess);
  for (AccessType access : {AccessType::kRead, AccessType::kWrite, AccessType::kAtomic}) {
    e.access = access;
    e.address = kMax64 - 1;
    e.size = kPageSize;
    events.push_back(e);
  }
  e.rereads = 1;
  events.push_back(e);
  e.rereads = kMax32;  // a GEMM's passes over its weight, at the limit
  events.push_back(e);

  e = MakeEvent(EventKind::kKernelEnd);
  e.exec_id = kMax32;
  events.push_back(e);

  // A synchronous host-to-device copy (cause 0) and an async device-to-host
  // one, with the host buffer at both ends of the address space.
  e = MakeEvent(EventKind::kCopy);
  e.address = kBlockSize;
  e.size = kMax64 - kBlockSize;
  e.host_address = 1;
  events.push_back(e);
  e.cause = 3;
  e.host_address = kMax64;
  events.push_back(e);
  events.push_back(MakeEvent(EventKind::kSync));

  e = MakeEvent(EventKind::kFault);
  e.access = AccessType::kAtomic;
  e.exec_id = kMax32;
  e.sm = kMax32;
  e.address = kMax64 & ~(kPageSize - 1);
  e.time_ns = kMaxNanos;
  events.push_back(e);
  e.sm = 0;
  e.exec_id = 1;
  e.time_ns = 1;
  events.push_back(e);

  // Fields a kind does not use still round-trip, and a Migrate's cause is a
  // raw byte: the trace stores what the producer set.
  e = MakeEvent(EventKind::kMigrate);
  e.cause = 255;
  e.sm = 3;
  e.iteration = 9;
  e.duration_ns = -5;
  e.time_ns = std::numeric_limits<Nanos>::min();
  events.push_back(e);
  return events;
}

TEST(TraceTest, RoundTripsEveryKindWithEdgeValues) {
  const std::string path = TempPath("edge.umt");
  const std::vector<Event> events = EdgeEvents();
  WriteTrace(path, {{"workload", "edge"}}, events);
  ReadResult result = ReadTrace(path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.events, events);
  std::remove(path.c_str());
}

TEST(TraceTest, RoundTripsEdgeValuesAcrossChunkBoundaries) {
  // One-byte chunks put every event in a chunk of its own, so the delta
  // state is reset between every pair.
  const std::string path = TempPath("edge.umt");
  const std::vector<Event> events = EdgeEvents();
  WriteTrace(path, {}, events, {.chunk_bytes = 1});
  ReadResult result = ReadTrace(path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.events, events);
  std::remove(path.c_str());
}

TEST(TraceTest, RoundTripsMetadataInOrder) {
  const std::string path = TempPath("meta.umt");
  const Metadata metadata = {{"workload", "gpt2:batch=8"},
                             {"device", "h200"},
                             {"policy", "deepum"},
                             {"footprint_bytes", "123456789012"},
                             {"empty", ""},
                             {"binary", std::string("a\0b\nc\xff", 6)},
                             {"long", std::string(100000, 'v')}};
  WriteTrace(path, metadata, {});
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->metadata(), metadata);
  EXPECT_EQ((*reader)->version(), kTraceVersion);
  EXPECT_EQ((*reader)->Metadata("device"), "h200");
  EXPECT_EQ((*reader)->Metadata("empty"), "");
  EXPECT_EQ((*reader)->Metadata("absent"), "");
  Event event;
  EXPECT_FALSE((*reader)->Next(event));  // no events: a valid, empty trace
  EXPECT_TRUE((*reader)->status().ok()) << (*reader)->status();
  std::remove(path.c_str());
}

// A deterministic stream that looks like a recording: allocations, kernels,
// accesses and faults with mostly small address and time steps. std::mt19937_64
// is specified exactly, and only its raw output is used, so every platform
// sees the same events.
Event SyntheticEvent(std::mt19937_64& random, uint64_t index) {
  static constexpr EventKind kKinds[] = {
      EventKind::kIterationBegin, EventKind::kAlloc,   EventKind::kFree,
      EventKind::kActivate,       EventKind::kDeactivate, EventKind::kKernelDefine,
      EventKind::kKernelBegin,    EventKind::kAccess,  EventKind::kKernelEnd,
      EventKind::kFault,          EventKind::kMigrate, EventKind::kEvict,
      EventKind::kInvalidate,     EventKind::kKernelFaultTimes};
  const uint64_t r = random();
  Event event = MakeEvent(kKinds[r % std::size(kKinds)]);
  switch (event.kind) {
    case EventKind::kIterationBegin: event.iteration = index; break;
    case EventKind::kKernelDefine:
      event.exec_id = static_cast<uint32_t>(r >> 40);
      event.name = absl::StrCat("kernel_", r % 1000, std::string((r >> 8) % 64, 'n'));
      break;
    case EventKind::kKernelBegin:
      event.exec_id = static_cast<uint32_t>(r >> 40);
      event.duration_ns = static_cast<Nanos>((r >> 20) % 1000000);
      break;
    case EventKind::kKernelEnd: event.exec_id = static_cast<uint32_t>(r >> 40); break;
    case EventKind::kKernelFaultTimes:
      event.exec_id = static_cast<uint32_t>(r >> 40);
      event.duration_ns = static_cast<Nanos>((r >> 20) % 4000000);
      event.time_ns = event.duration_ns / 2;
      break;
    case EventKind::kFault:
      event.access = static_cast<AccessType>((r >> 4) % 3);
      event.sm = static_cast<uint32_t>((r >> 8) % 132);
      event.exec_id = static_cast<uint32_t>(r >> 50);
      event.address = (r >> 16) << 12;
      event.time_ns = static_cast<Nanos>(index * 1000 + (r & 0xff));
      break;
    default:
      event.access = event.kind == EventKind::kAccess ? static_cast<AccessType>((r >> 4) % 3)
                                                      : AccessType::kRead;
      event.address = (r >> 20) << 12;
      event.size = ((r >> 6) % 512 + 1) * kPageSize;
      event.cause = event.kind == EventKind::kMigrate ? (r >> 3) & 1 : 0;
      event.time_ns = static_cast<Nanos>(index * 1000);
      break;
  }
  return event;
}

TEST(TraceTest, StreamsManyChunks) {
  constexpr uint64_t kEvents = 250000;
  const std::string path = TempPath("many.umt");
  {
    absl::StatusOr<std::unique_ptr<TraceWriter>> writer =
        TraceWriter::Create(path, {{"workload", "synthetic"}}, {.chunk_bytes = 16 << 10});
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::mt19937_64 random(42);
    for (uint64_t i = 0; i < kEvents; ++i) {
      ASSERT_TRUE((*writer)->Append(SyntheticEvent(random, i)).ok());
    }
    EXPECT_EQ((*writer)->events_written(), kEvents);
    ASSERT_TRUE((*writer)->Close().ok());
  }
  EXPECT_FALSE(Exists(path + ".tmp"));

  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Metadata("workload"), "synthetic");
  std::mt19937_64 random(42);
  Event event;
  uint64_t count = 0;
  while ((*reader)->Next(event)) {
    ASSERT_EQ(event, SyntheticEvent(random, count)) << "event " << count;
    ++count;
  }
  ASSERT_TRUE((*reader)->status().ok()) << (*reader)->status();
  EXPECT_EQ(count, kEvents);

  EXPECT_GE(CountChunks(ReadFile(path)), 100u);
  std::remove(path.c_str());
}

TEST(TraceTest, WritesTemporaryFileUntilClose) {
  const std::string path = TempPath("tmp.umt");
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append(MakeEvent(EventKind::kIterationBegin)).ok());
  EXPECT_TRUE(Exists(path + ".tmp"));
  EXPECT_FALSE(Exists(path));
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_TRUE((*writer)->Close().ok());  // idempotent
  EXPECT_FALSE(Exists(path + ".tmp"));
  EXPECT_TRUE(Exists(path));
  EXPECT_EQ((*writer)->Append(MakeEvent(EventKind::kIterationBegin)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*writer)->events_written(), 1u);
  EXPECT_EQ(ReadTrace(path).events.size(), 1u);
  std::remove(path.c_str());
}

TEST(TraceTest, DestructorCloses) {
  const std::string path = TempPath("dtor.umt");
  {
    absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, {{"k", "v"}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(MakeEvent(EventKind::kKernelEnd)).ok());
  }
  ReadResult result = ReadTrace(path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.events.size(), 1u);
  EXPECT_EQ(result.metadata, (Metadata{{"k", "v"}}));
  std::remove(path.c_str());
}

TEST(TraceTest, WriterRejectsEventsTheFormatCannotHold) {
  const std::string path = TempPath("bad_events.umt");
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, {});
  ASSERT_TRUE(writer.ok()) << writer.status();

  Event long_name = MakeEvent(EventKind::kKernelDefine);
  long_name.name = std::string(kMaxKernelNameBytes + 1, 'x');
  EXPECT_EQ((*writer)->Append(long_name).code(), absl::StatusCode::kInvalidArgument);
  Event unknown_kind = MakeEvent(static_cast<EventKind>(42));
  EXPECT_EQ((*writer)->Append(unknown_kind).code(), absl::StatusCode::kInvalidArgument);
  Event unknown_access = MakeEvent(EventKind::kAccess);
  unknown_access.access = static_cast<AccessType>(7);
  EXPECT_EQ((*writer)->Append(unknown_access).code(), absl::StatusCode::kInvalidArgument);

  // A rejected event leaves the writer usable and records nothing.
  ASSERT_TRUE((*writer)->Append(MakeEvent(EventKind::kKernelEnd)).ok());
  EXPECT_EQ((*writer)->events_written(), 1u);
  ASSERT_TRUE((*writer)->Close().ok());
  ReadResult result = ReadTrace(path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.events.size(), 1u);
  std::remove(path.c_str());
}

TEST(TraceTest, WriterRejectsBadMetadataAndOptionsWithoutCreatingAFile) {
  const std::string path = TempPath("bad_meta.umt");
  Metadata too_many;
  for (uint32_t i = 0; i <= kMaxMetadataEntries; ++i) too_many.emplace_back(absl::StrCat(i), "");
  const Metadata cases[] = {
      {{"a", "1"}, {"a", "2"}},
      {{"", "value"}},
      too_many,
      {{"big", std::string(kMaxMetadataBytes, 'x')}},
  };
  for (const Metadata& metadata : cases) {
    absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, metadata);
    EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(Exists(path + ".tmp"));
  }
  EXPECT_EQ(TraceWriter::Create(path, {}, {.chunk_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TraceWriter::Create(path, {}, {.chunk_bytes = kMaxChunkBytes}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TraceWriter::Create(path, {}, {.compression_level = 1000}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Exists(path + ".tmp"));
  EXPECT_FALSE(Exists(path));
}

TEST(TraceTest, CreateInMissingDirectoryFailsClearly) {
  const std::string path = TempPath("no/such/dir/x.umt");
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(path, {});
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr("x.umt.tmp"));
  EXPECT_THAT(writer.status().message(), Not(HasSubstr("\n")));
}

// --- Hand-made files: the framing helpers write exactly what the writer
// writes, so a test can damage one field and keep the rest valid. ---

std::string FileHeader(const Metadata& metadata, uint32_t version = kTraceVersion) {
  std::string block;
  EXPECT_TRUE(trace_internal::EncodeMetadata(metadata, block).ok());
  std::string bytes(kTraceMagic, sizeof(kTraceMagic));
  trace_internal::AppendFixed32(version, bytes);
  trace_internal::AppendFixed32(static_cast<uint32_t>(block.size()), bytes);
  trace_internal::AppendFixed64(trace_internal::Fnv1a64(block), bytes);
  return bytes + block;
}

// A chunk frame around `payload` (encoded events), with a correct checksum.
std::string ChunkFrame(absl::string_view payload, uint32_t event_count) {
  std::string compressed(ZSTD_compressBound(payload.size()), '\0');
  const size_t size =
      ZSTD_compress(compressed.data(), compressed.size(), payload.data(), payload.size(), 1);
  EXPECT_FALSE(ZSTD_isError(size));
  compressed.resize(size);
  trace_internal::ChunkHeader header;
  header.compressed_size = static_cast<uint32_t>(size);
  header.uncompressed_size = static_cast<uint32_t>(payload.size());
  header.event_count = event_count;
  header.checksum = trace_internal::Fnv1a64(payload);
  std::string bytes;
  header.AppendTo(bytes);
  return bytes + compressed;
}

std::string EndFrame(uint32_t chunks, uint64_t events) {
  std::string bytes;
  trace_internal::EndFrame{chunks, events}.AppendTo(bytes);
  return bytes;
}

std::string Encode(const std::vector<Event>& events) {
  trace_internal::EventEncoder encoder;
  std::string payload;
  for (const Event& event : events) encoder.Append(event, payload);
  return payload;
}

void ExpectOneLineError(const absl::Status& status, const std::string& path) {
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), Not(HasSubstr("\n")));
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(TraceTest, HandMadeFileMatchesTheWriter) {
  const std::string path = TempPath("hand.umt");
  const std::vector<Event> events = EdgeEvents();
  WriteTrace(path, {{"a", "b"}}, events, {.chunk_bytes = kDefaultChunkBytes});
  const std::string written = ReadFile(path);
  const std::string made = FileHeader({{"a", "b"}}) +
                           ChunkFrame(Encode(events), static_cast<uint32_t>(events.size())) +
                           EndFrame(1, events.size());
  // Same layout; only the zstd level (and so the compressed bytes) differs.
  const std::string reference_path = TempPath("hand_made.umt");
  WriteFile(reference_path, made);
  ReadResult result = ReadTrace(reference_path);
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.events, events);
  EXPECT_EQ(written.substr(0, FileHeader({{"a", "b"}}).size()), FileHeader({{"a", "b"}}));
  EXPECT_EQ(written.substr(written.size() - kEndFrameBytes), EndFrame(1, events.size()));
  std::remove(path.c_str());
  std::remove(reference_path.c_str());
}

TEST(TraceTest, OpenRejectsMissingForeignAndNewerFiles) {
  const std::string path = TempPath("open.umt");

  absl::Status missing = TraceReader::Open(path).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  ExpectOneLineError(missing, path);

  WriteFile(path, "");
  absl::Status empty = TraceReader::Open(path).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("not a umlab trace"));
  ExpectOneLineError(empty, path);

  WriteFile(path, "workload,device\ngpt2,h200\n");
  absl::Status text = TraceReader::Open(path).status();
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.message(), HasSubstr("not a umlab trace"));
  ExpectOneLineError(text, path);

  WriteFile(path, FileHeader({}, kTraceVersion + 1) + EndFrame(0, 0));
  absl::Status newer = TraceReader::Open(path).status();
  EXPECT_EQ(newer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.message(), HasSubstr("newer"));
  ExpectOneLineError(newer, path);

  WriteFile(path, FileHeader({}, 0) + EndFrame(0, 0));
  absl::Status zero = TraceReader::Open(path).status();
  EXPECT_EQ(zero.code(), absl::StatusCode::kDataLoss);
  ExpectOneLineError(zero, path);

  const std::string directory = TempPath("dir.umt");
  ASSERT_EQ(::mkdir(directory.c_str(), 0700), 0);
  absl::Status not_file = TraceReader::Open(directory).status();
  EXPECT_EQ(not_file.code(), absl::StatusCode::kInvalidArgument);
  ExpectOneLineError(not_file, directory);
  ::rmdir(directory.c_str());
  std::remove(path.c_str());
}

TEST(TraceTest, ErrorMessagesEscapeControlCharactersInPaths) {
  const std::string path = TempPath("line\nbreak.umt");
  absl::Status missing = TraceReader::Open(path).status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), Not(HasSubstr("\n")));
  EXPECT_THAT(missing.message(), HasSubstr("line\\nbreak.umt"));
}

// The small multi-chunk trace that the truncation and mutation tests damage.
struct SmallTrace {
  Metadata metadata = {{"workload", "small"}, {"device", "test"}};
  std::vector<Event> events;
  std::string bytes;
};

const SmallTrace& Small() {
  static const SmallTrace* const trace = [] {
    auto* small = new SmallTrace;
    std::mt19937_64 random(7);
    for (uint64_t i = 0; i < 48; ++i) small->events.push_back(SyntheticEvent(random, i));
    const std::string path = absl::StrCat(::testing::TempDir(), "/umlab_small_", ::getpid());
    WriteTrace(path, small->metadata, small->events, {.chunk_bytes = 64});
    small->bytes = ReadFile(path);
    std::remove(path.c_str());
    return small;
  }();
  return *trace;
}

TEST(TraceTest, EveryProperPrefixIsAnError) {
  const SmallTrace& small = Small();
  const std::string path = TempPath("prefix.umt");
  ASSERT_GT(small.bytes.size(), 300u);
  {
    WriteFile(path, small.bytes);
    ReadResult whole = ReadTrace(path);
    ASSERT_TRUE(whole.status.ok()) << whole.status;
    ASSERT_EQ(whole.events, small.events);
  }
  ASSERT_GE(CountChunks(small.bytes), 5u);

  for (size_t length = 0; length < small.bytes.size(); ++length) {
    SCOPED_TRACE(absl::StrCat("prefix of ", length, " bytes"));
    WriteFile(path, absl::string_view(small.bytes).substr(0, length));
    ReadResult result = ReadTrace(path);
    ExpectOneLineError(result.status, path);
    if (length >= sizeof(kTraceMagic)) {
      EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(result.status.message(), HasSubstr("truncated at byte"));
    }
    // What was delivered before the cut is a prefix of the real events.
    ASSERT_LE(result.events.size(), small.events.size());
    for (size_t i = 0; i < result.events.size(); ++i) ASSERT_EQ(result.events[i], small.events[i]);
  }
  std::remove(path.c_str());
}

// Damages `bytes` in one of several ways, chosen by `random`.
std::string Mutate(std::string bytes, std::mt19937_64& random) {
  if (bytes.empty()) return bytes;
  const uint64_t choice = random() % 7;
  const size_t size = bytes.size();
  const size_t at = size == 0 ? 0 : random() % size;
  switch (choice) {
    case 0: {  // flip one to three bits
      const int flips = 1 + static_cast<int>(random() % 3);
      for (int i = 0; i < flips; ++i) bytes[random() % size] ^= static_cast<char>(1u << (random() % 8));
      break;
    }
    case 1:  // overwrite a byte
      bytes[at] = static_cast<char>(random());
      break;
    case 2:  // insert random bytes
      bytes.insert(at, std::string(1 + random() % 8, static_cast<char>(random())));
      break;
    case 3:  // delete a range
      bytes.erase(at, 1 + random() % 16);
      break;
    case 4: {  // a huge or odd 32-bit length wherever one might be
      static constexpr uint32_t kValues[] = {0xFFFFFFFFu, 0x80000000u, 0u, 1u, 0x01000001u,
                                             kMaxChunkBytes + 1, kMaxMetadataBytes + 1};
      const uint32_t value = kValues[random() % std::size(kValues)];
      std::string encoded;
      trace_internal::AppendFixed32(value, encoded);
      bytes.replace(at, encoded.size(), encoded);
      break;
    }
    case 5:  // swap in a random 64-bit value (a checksum or a count)
      for (int i = 0; i < 8 && at + i < size; ++i) bytes[at + i] = static_cast<char>(random());
      break;
    case 6:  // duplicate a range (a repeated chunk, say)
      bytes.insert(at, bytes.substr(at, 1 + random() % 64));
      break;
  }
  return bytes;
}

TEST(TraceTest, MutatedFilesFailCleanlyOrReadTheOriginal) {
  const SmallTrace& small = Small();
  const std::string path = TempPath("mutant.umt");
  std::mt19937_64 random(2024);
  int failures = 0;
  constexpr int kMutants = 6000;
  for (int i = 0; i < kMutants; ++i) {
    std::string bytes = Mutate(small.bytes, random);
    if (random() % 4 == 0) bytes = Mutate(std::move(bytes), random);
    WriteFile(path, bytes);
    ReadResult result = ReadTrace(path);
    if (result.status.ok()) {
      // Checksums cover every byte that carries data, so a file that still
      // reads must read as the original.
      ASSERT_EQ(result.events, small.events) << "mutant " << i;
      ASSERT_EQ(result.metadata, small.metadata) << "mutant " << i;
    } else {
      ++failures;
      ASSERT_THAT(result.status.message(), Not(HasSubstr("\n"))) << "mutant " << i;
      ASSERT_THAT(result.status.message(), HasSubstr(path)) << "mutant " << i;
      for (size_t e = 0; e < result.events.size() && e < small.events.size(); ++e) {
        ASSERT_EQ(result.events[e], small.events[e]) << "mutant " << i;
      }
    }
  }
  EXPECT_GT(failures, kMutants * 9 / 10);
  std::remove(path.c_str());
}

// Checksums stop random damage before the event decoder, so this feeds the
// decoder damaged payloads inside valid, correctly checksummed chunks.
TEST(TraceTest, DamagedEventBytesInValidChunksFailCleanly) {
  const SmallTrace& small = Small();
  const std::string payload = Encode(small.events);
  const std::string path = TempPath("payload.umt");
  std::mt19937_64 random(99);
  constexpr int kMutants = 3000;
  int failures = 0;
  for (int i = 0; i < kMutants; ++i) {
    std::string damaged;
    if (i % 10 == 0) {  // pure noise
      damaged.resize(1 + random() % 200);
      for (char& c : damaged) c = static_cast<char>(random());
    } else {
      damaged = Mutate(payload, random);
    }
    if (damaged.empty()) damaged = "x";
    // Declare the original count, or one off, or the byte count.
    uint32_t count = static_cast<uint32_t>(small.events.size());
    if (random() % 3 == 0) count = static_cast<uint32_t>(1 + random() % damaged.size());
    WriteFile(path, FileHeader(small.metadata) + ChunkFrame(damaged, count) +
                        EndFrame(1, count));
    ReadResult result = ReadTrace(path);
    if (!result.status.ok()) {
      ++failures;
      ASSERT_EQ(result.status.code(), absl::StatusCode::kDataLoss) << result.status;
      ASSERT_THAT(result.status.message(), Not(HasSubstr("\n")));
      ASSERT_THAT(result.status.message(), HasSubstr("chunk 0"));
    } else {
      ASSERT_EQ(result.events.size(), count);
    }
  }
  EXPECT_GT(failures, kMutants / 2);
  std::remove(path.c_str());
}

TEST(TraceTest, UnknownEventKindIsCorruption) {
  const std::string path = TempPath("kind.umt");
  WriteFile(path, FileHeader({}) + ChunkFrame(std::string("\x2a\x00", 2), 1) + EndFrame(1, 1));
  ReadResult result = ReadTrace(path);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(result.status.message(), HasSubstr("unknown event kind 0x2a"));
  ExpectOneLineError(result.status, path);
  std::remove(path.c_str());
}

TEST(TraceTest, ChunkEventCountMustMatch) {
  const std::string path = TempPath("count.umt");
  const std::string two = Encode({MakeEvent(EventKind::kKernelEnd), MakeEvent(EventKind::kKernelEnd)});
  for (uint32_t declared : {1u, 3u}) {
    WriteFile(path, FileHeader({}) + ChunkFrame(two, declared) + EndFrame(1, declared));
    ReadResult result = ReadTrace(path);
    EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(result.status.message(), HasSubstr("chunk 0"));
    ExpectOneLineError(result.status, path);
  }
  // A wrong total in the end marker.
  WriteFile(path, FileHeader({}) + ChunkFrame(two, 2) + EndFrame(1, 3));
  EXPECT_THAT(ReadTrace(path).status.message(), HasSubstr("end marker counts 3 events"));
  // Bytes after the end marker.
  WriteFile(path, FileHeader({}) + ChunkFrame(two, 2) + EndFrame(1, 2) + "x");
  EXPECT_THAT(ReadTrace(path).status.message(), HasSubstr("1 stray bytes"));
  std::remove(path.c_str());
}

TEST(TraceTest, HugeDeclaredSizesAreRejectedBeforeAllocating) {
  const std::string path = TempPath("huge.umt");
  const std::string payload = Encode({MakeEvent(EventKind::kKernelEnd)});
  const std::string good_chunk = ChunkFrame(payload, 1);
  // Field offsets within a chunk frame: 4 compressed, 8 uncompressed, 12 count.
  struct Case {
    size_t field_offset;
    const char* expected;
  };
  for (const Case& c : {Case{8, "4294967295 uncompressed bytes"},
                        Case{4, "4294967295 compressed bytes"}, Case{12, "4294967295 events"}}) {
    std::string chunk = good_chunk;
    chunk.replace(c.field_offset, 4, "\xff\xff\xff\xff");
    // Padding, so that the file is not simply too short for the claim.
    WriteFile(path, FileHeader({}) + chunk + std::string(1 << 16, '\0'));
    largest_allocation = 0;
    ReadResult result = ReadTrace(path);
    EXPECT_LT(largest_allocation.load(), size_t{1} << 20) << c.expected;
    EXPECT_EQ(result.status.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(result.status.message(), HasSubstr(c.expected));
    ExpectOneLineError(result.status, path);
  }

  // Metadata claiming 4 GiB.
  std::string header = FileHeader({});
  header.replace(12, 4, "\xff\xff\xff\xff");
  WriteFile(path, header + std::string(1 << 16, '\0'));
  largest_allocation = 0;
  absl::Status status = TraceReader::Open(path).status();
  EXPECT_LT(largest_allocation.load(), size_t{1} << 20);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("4294967295 bytes of metadata"));
  ExpectOneLineError(status, path);

  // A claim within the limits but beyond the end of the file is a truncation,
  // found before the bytes are allocated.
  std::string chunk = good_chunk;
  chunk.replace(4, 4, std::string("\x00\x00\x10\x00", 4));  // 1 MiB compressed
  WriteFile(path, FileHeader({}) + chunk);
  largest_allocation = 0;
  ReadResult result = ReadTrace(path);
  EXPECT_LT(largest_allocation.load(), size_t{1} << 20);
  EXPECT_THAT(result.status.message(), HasSubstr("chunk 0 declares 1048576 bytes"));
  EXPECT_THAT(result.status.message(), HasSubstr("truncated at byte"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace umlab
