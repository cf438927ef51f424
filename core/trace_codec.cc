#include "core/trace_codec.h"

#include <zstd.h>

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "core/trace_format.h"

namespace umlab {
namespace trace_internal {

static_assert(kMaxCompressedChunkBytes == ZSTD_COMPRESSBOUND(kMaxChunkBytes),
              "kMaxCompressedChunkBytes must be zstd's bound for kMaxChunkBytes");
// A chunk the writer closes late (one maximal event past the target) must
// still be readable.
static_assert(kDefaultChunkBytes + kMaxEncodedEventBytes <= kMaxChunkBytes);

namespace {

uint64_t ZigZag(uint64_t delta) { return (delta << 1) ^ (0 - (delta >> 63)); }
uint64_t UnZigZag(uint64_t value) { return (value >> 1) ^ (0 - (value & 1)); }

// No default label: a new EventKind makes -Wswitch fail the build here, which
// is the moment to decide its encoding and raise kTraceVersion.
bool IsKnownKind(uint8_t byte) {
  switch (static_cast<EventKind>(byte)) {
    case EventKind::kIterationBegin:
    case EventKind::kAlloc:
    case EventKind::kFree:
    case EventKind::kActivate:
    case EventKind::kDeactivate:
    case EventKind::kKernelDefine:
    case EventKind::kKernelBegin:
    case EventKind::kAccess:
    case EventKind::kKernelEnd:
    case EventKind::kKernelFaultTimes:
    case EventKind::kCopy:
    case EventKind::kSync:
    case EventKind::kFault:
    case EventKind::kMigrate:
    case EventKind::kEvict:
    case EventKind::kInvalidate:
      return true;
  }
  return false;
}

absl::Status Bad(absl::string_view reason) { return absl::DataLossError(reason); }

constexpr size_t kMaxVarintBytes = 10;

// Writes `value` as a varint at `out` and returns the end. Encoding into a
// stack buffer and appending once per event is several times faster than a
// push_back per byte.
char* PutVarint(uint64_t value, char* out) {
  while (value >= 0x80) {
    *out++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<char>(value);
  return out;
}

}  // namespace

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

void AppendFixed32(uint32_t value, std::string& out) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

void AppendFixed64(uint64_t value, std::string& out) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint32_t LoadFixed32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

uint64_t LoadFixed64(const char* bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

void AppendVarint(uint64_t value, std::string& out) {
  char bytes[kMaxVarintBytes];
  out.append(bytes, PutVarint(value, bytes) - bytes);
}

bool ByteCursor::ReadByte(uint8_t& value) {
  if (done()) return false;
  value = static_cast<uint8_t>(bytes_[position_++]);
  return true;
}

bool ByteCursor::ReadLongVarint(uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t byte;
    if (!ReadByte(byte)) return false;
    // The tenth byte holds only bit 63; anything more would overflow.
    if (shift == 63 && byte > 1) return false;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

bool ByteCursor::ReadBytes(size_t count, absl::string_view& value) {
  if (count > remaining()) return false;
  value = bytes_.substr(position_, count);
  position_ += count;
  return true;
}

void ChunkHeader::AppendTo(std::string& out) const {
  out.append(kChunkTag, sizeof(kChunkTag));
  AppendFixed32(compressed_size, out);
  AppendFixed32(uncompressed_size, out);
  AppendFixed32(event_count, out);
  AppendFixed64(checksum, out);
}

ChunkHeader ChunkHeader::Parse(const char* bytes) {
  ChunkHeader header;
  header.compressed_size = LoadFixed32(bytes);
  header.uncompressed_size = LoadFixed32(bytes + 4);
  header.event_count = LoadFixed32(bytes + 8);
  header.checksum = LoadFixed64(bytes + 12);
  return header;
}

void EndFrame::AppendTo(std::string& out) const {
  out.append(kEndTag, sizeof(kEndTag));
  AppendFixed32(chunk_count, out);
  AppendFixed64(event_count, out);
}

EndFrame EndFrame::Parse(const char* bytes) {
  EndFrame frame;
  frame.chunk_count = LoadFixed32(bytes);
  frame.event_count = LoadFixed64(bytes + 4);
  return frame;
}

absl::Status EncodeMetadata(const Metadata& metadata, std::string& out) {
  if (metadata.size() > kMaxMetadataEntries) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trace metadata has %d entries; the format allows at most %d",
                        metadata.size(), kMaxMetadataEntries));
  }
  absl::flat_hash_set<absl::string_view> keys;
  std::string block;
  AppendVarint(metadata.size(), block);
  for (const auto& [key, value] : metadata) {
    if (key.empty()) return absl::InvalidArgumentError("trace metadata has an empty key");
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trace metadata key \"%s\" appears twice; keys must be unique", absl::CHexEscape(key)));
    }
    AppendVarint(key.size(), block);
    block += key;
    AppendVarint(value.size(), block);
    block += value;
    if (block.size() > kMaxMetadataBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "trace metadata is larger than the format's limit of %d bytes", kMaxMetadataBytes));
    }
  }
  out += block;
  return absl::OkStatus();
}

absl::Status DecodeMetadata(absl::string_view block, Metadata& metadata) {
  ByteCursor cursor(block);
  uint64_t count;
  if (!cursor.ReadVarint(count)) return Bad("the metadata entry count is malformed");
  if (count > kMaxMetadataEntries) {
    return Bad(absl::StrFormat("the metadata declares %d entries, more than the limit of %d",
                               count, kMaxMetadataEntries));
  }
  metadata.clear();
  metadata.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    absl::string_view text[2];
    for (absl::string_view& part : text) {
      uint64_t length;
      if (!cursor.ReadVarint(length) || !cursor.ReadBytes(length, part)) {
        return Bad(absl::StrFormat("metadata entry %d runs past the end of the metadata block", i));
      }
    }
    metadata.emplace_back(std::string(text[0]), std::string(text[1]));
  }
  if (!cursor.done()) {
    return Bad(absl::StrFormat("the metadata block has %d stray bytes after its last entry",
                               cursor.remaining()));
  }
  return absl::OkStatus();
}

absl::Status ValidateEvent(const Event& event) {
  const uint8_t kind = static_cast<uint8_t>(event.kind);
  if (!IsKnownKind(kind)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot record an event of unknown kind %d", kind));
  }
  if (static_cast<uint8_t>(event.access) > static_cast<uint8_t>(AccessType::kAtomic)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot record a %s event with unknown access type %d", EventKindName(event.kind),
        static_cast<uint8_t>(event.access)));
  }
  if (event.name.size() > kMaxKernelNameBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "kernel name of %d bytes is longer than the trace format's limit of %d bytes",
        event.name.size(), kMaxKernelNameBytes));
  }
  return absl::OkStatus();
}

void EventEncoder::Append(const Event& event, std::string& out) {
  uint32_t mask = 0;
  if (event.address != 0) mask |= kFieldAddress;
  if (event.size != 0) mask |= kFieldSize;
  if (event.time_ns != 0) mask |= kFieldTime;
  if (event.exec_id != 0) mask |= kFieldExecId;
  if (event.access != AccessType::kRead) mask |= kFieldAccess;
  if (event.sm != 0) mask |= kFieldSm;
  if (event.cause != 0) mask |= kFieldCause;
  if (event.iteration != 0) mask |= kFieldIteration;
  if (event.duration_ns != 0) mask |= kFieldDuration;
  if (!event.name.empty()) mask |= kFieldName;
  if (event.rereads != 0) mask |= kFieldRereads;
  if (event.host_address != 0) mask |= kFieldHostAddress;

  // Everything but the name's bytes: kind, mask, and at most eleven varints
  // (rereads and host_address go after the name's bytes).
  char bytes[1 + 11 * kMaxVarintBytes];
  char* end = bytes;
  *end++ = static_cast<char>(event.kind);
  end = PutVarint(mask, end);
  if (mask & kFieldAddress) {
    end = PutVarint(ZigZag(event.address - previous_address_), end);
    previous_address_ = event.address;
  }
  if (mask & kFieldSize) end = PutVarint(event.size, end);
  if (mask & kFieldTime) {
    const uint64_t time = static_cast<uint64_t>(event.time_ns);
    end = PutVarint(ZigZag(time - previous_time_), end);
    previous_time_ = time;
  }
  if (mask & kFieldExecId) end = PutVarint(event.exec_id, end);
  if (mask & kFieldAccess) end = PutVarint(static_cast<uint8_t>(event.access), end);
  if (mask & kFieldSm) end = PutVarint(event.sm, end);
  if (mask & kFieldCause) end = PutVarint(event.cause, end);
  if (mask & kFieldIteration) end = PutVarint(event.iteration, end);
  if (mask & kFieldDuration) end = PutVarint(ZigZag(static_cast<uint64_t>(event.duration_ns)), end);
  if (mask & kFieldName) end = PutVarint(event.name.size(), end);
  out.append(bytes, end - bytes);
  out += event.name;
  if (mask & kFieldRereads) AppendVarint(event.rereads, out);
  if (mask & kFieldHostAddress) AppendVarint(event.host_address, out);
}

absl::Status EventDecoder::Decode(ByteCursor& cursor, Event& event) {
  uint8_t kind;
  if (!cursor.ReadByte(kind)) return Bad("an event is cut off before its kind byte");
  if (!IsKnownKind(kind)) return Bad(absl::StrFormat("unknown event kind 0x%02x", kind));
  // Reset every field but keep the name's buffer: readers decode millions of
  // events into one Event.
  std::string name_buffer = std::move(event.name);
  name_buffer.clear();
  event = Event();
  event.name = std::move(name_buffer);
  event.kind = static_cast<EventKind>(kind);
  auto kind_name = [&event] { return EventKindName(event.kind); };

  uint64_t mask;
  if (!cursor.ReadVarint(mask)) {
    return Bad(absl::StrFormat("a %s event has a malformed field mask", kind_name()));
  }
  if ((mask & ~uint64_t{kAllTraceFields}) != 0) {
    return Bad(absl::StrFormat("a %s event has unknown field bits 0x%x", kind_name(),
                               mask & ~uint64_t{kAllTraceFields}));
  }

  // Reads each present field in encoding order. A field is present only when
  // it is non-zero, so a zero (or out-of-range) value means damaged bytes.
  // Address and time are deltas, so for them the sum is what must be
  // non-zero, not the stored value.
  uint64_t value = 0;
  const char* failed_field = nullptr;
  auto field = [&](uint32_t bit, const char* name, uint64_t max, bool is_delta = false) {
    if (failed_field != nullptr || (mask & bit) == 0) return false;
    if (!cursor.ReadVarint(value) || value > max || (value == 0 && !is_delta)) {
      failed_field = name;
      return false;
    }
    return true;
  };
  constexpr uint64_t kAny = ~uint64_t{0};
  if (field(kFieldAddress, "address", kAny, /*is_delta=*/true)) {
    previous_address_ += UnZigZag(value);
    event.address = previous_address_;
    if (event.address == 0) failed_field = "address";
  }
  if (field(kFieldSize, "size", kAny)) event.size = value;
  if (field(kFieldTime, "time_ns", kAny, /*is_delta=*/true)) {
    previous_time_ += UnZigZag(value);
    event.time_ns = static_cast<Nanos>(previous_time_);
    if (event.time_ns == 0) failed_field = "time_ns";
  }
  if (field(kFieldExecId, "exec_id", UINT32_MAX)) event.exec_id = static_cast<uint32_t>(value);
  if (field(kFieldAccess, "access", static_cast<uint8_t>(AccessType::kAtomic))) {
    event.access = static_cast<AccessType>(value);
  }
  if (field(kFieldSm, "sm", UINT32_MAX)) event.sm = static_cast<uint32_t>(value);
  if (field(kFieldCause, "cause", UINT8_MAX)) event.cause = static_cast<uint8_t>(value);
  if (field(kFieldIteration, "iteration", kAny)) event.iteration = value;
  if (field(kFieldDuration, "duration_ns", kAny)) {
    event.duration_ns = static_cast<Nanos>(UnZigZag(value));
  }
  if (field(kFieldName, "name", kMaxKernelNameBytes)) {
    absl::string_view name;
    if (cursor.ReadBytes(value, name)) {
      event.name.assign(name.data(), name.size());
    } else {
      failed_field = "name";
    }
  }
  if (field(kFieldRereads, "rereads", UINT32_MAX)) event.rereads = static_cast<uint32_t>(value);
  if (field(kFieldHostAddress, "host_address", kAny)) event.host_address = value;
  if (failed_field != nullptr) {
    return Bad(absl::StrFormat("the %s field of a %s event is malformed or out of range",
                               failed_field, kind_name()));
  }
  return absl::OkStatus();
}

std::string DisplayPath(absl::string_view path) {
  for (char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return absl::CHexEscape(path);
  }
  return std::string(path);
}

}  // namespace trace_internal
}  // namespace umlab
