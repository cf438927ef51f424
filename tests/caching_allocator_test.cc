// Worked examples of PyTorch's caching-allocator rules
// (c10/cuda/CUDACachingAllocator.cpp), checked against the model's events.
#include "workloads/allocator/caching_allocator.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace umlab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t KiB = 1ull << 10;
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kBase = 0x7f0000000000;

// An allocator that records every event it reports.
class Recorder {
 public:
  explicit Recorder(CachingAllocatorOptions options = {})
      : allocator_(options, [this](const Event& e) { events_.push_back(e); }) {}

  CachingAllocator& allocator() { return allocator_; }

  // Allocates and returns the block's address; fails the test on error.
  uint64_t Allocate(uint64_t bytes) {
    absl::StatusOr<AllocatedBlock> block = allocator_.Allocate(bytes);
    EXPECT_TRUE(block.ok()) << block.status();
    return block.ok() ? block->address : 0;
  }
  void Free(uint64_t address) { EXPECT_TRUE(allocator_.Free(address).ok()); }

  // The events since the last call, as readable strings.
  std::vector<std::string> TakeEvents() {
    std::vector<std::string> out;
    for (const Event& e : events_) {
      out.push_back(absl::StrFormat("%s %#x %d", EventKindName(e.kind),
                                    e.address - kBase, e.size));
    }
    events_.clear();
    return out;
  }

 private:
  CachingAllocator allocator_;
  std::vector<Event> events_;
};

std::string Ev(const char* kind, uint64_t offset, uint64_t size) {
  return absl::StrFormat("%s %#x %d", kind, offset, size);
}

TEST(CachingAllocatorTest, RoundsRequestsUpTo512Bytes) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(1000), 1024u);
  EXPECT_EQ(CachingAllocator::RoundSize(4 * MiB + 1), 4 * MiB + 512);

  Recorder r;
  const uint64_t a = r.Allocate(1000);
  EXPECT_THAT(r.TakeEvents(),
              ElementsAre(Ev("alloc", 0, 2 * MiB), Ev("activate", 0, 1024)));
  EXPECT_EQ(r.allocator().stats().allocated_bytes, 1024u);
  EXPECT_EQ(r.allocator().stats().requested_bytes, 1000u);
  // The next request starts right after the rounded block.
  EXPECT_EQ(r.Allocate(1), a + 1024);
}

TEST(CachingAllocatorTest, OneMebibyteIsSmallOneMoreByteIsLarge) {
  EXPECT_TRUE(CachingAllocator::IsSmallRequest(CachingAllocator::RoundSize(MiB)));
  EXPECT_FALSE(CachingAllocator::IsSmallRequest(CachingAllocator::RoundSize(MiB + 1)));

  Recorder r;
  r.Allocate(MiB);
  // Small pool: a 2 MiB segment, split (1 MiB remains, >= 512 B).
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 0, 2 * MiB), Ev("activate", 0, MiB)));
  r.Allocate(MiB + 1);
  // Large pool: the small segment's free 1 MiB cannot serve it; a 20 MiB
  // segment is reserved.
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 2 * MiB, 20 * MiB),
                                          Ev("activate", 2 * MiB, MiB + 512)));
  EXPECT_EQ(r.allocator().stats().segment_count, 2u);
}

TEST(CachingAllocatorTest, FiveMebibytesShareOneTwentyMebibyteSegment) {
  Recorder r;
  r.Allocate(5 * MiB);
  EXPECT_THAT(r.TakeEvents(),
              ElementsAre(Ev("alloc", 0, 20 * MiB), Ev("activate", 0, 5 * MiB)));
  r.Allocate(5 * MiB);
  // The 15 MiB remainder serves it: no new segment.
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 5 * MiB, 5 * MiB)));
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(r.allocator().stats().allocated_bytes, 10 * MiB);
  EXPECT_TRUE(r.allocator().CheckConsistency().ok());
}

TEST(CachingAllocatorTest, LargeRequestsReserveTheirSizeRoundedTo2MiB) {
  Recorder r;
  r.Allocate(50 * MiB);
  EXPECT_THAT(r.TakeEvents(),
              ElementsAre(Ev("alloc", 0, 50 * MiB), Ev("activate", 0, 50 * MiB)));
  r.Allocate(10 * MiB + 1);  // rounded: 10 MiB + 512 -> a 12 MiB segment
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 50 * MiB, 12 * MiB),
                                          Ev("activate", 50 * MiB, 10 * MiB + 512)));
  EXPECT_EQ(CachingAllocator::SegmentSizeFor(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSizeFor(10 * MiB), 10 * MiB);
}

TEST(CachingAllocatorTest, EverySegmentStartsOn2MiBBoundary) {
  CachingAllocatorOptions options;
  options.device_base = kBase + 12345;  // rounded up to the next 2 MiB
  CachingAllocator allocator(options);
  for (uint64_t bytes : {uint64_t{100}, 3 * MiB, 11 * MiB + 7, 700 * KiB, 33 * MiB}) {
    absl::StatusOr<AllocatedBlock> block = allocator.Allocate(bytes);
    ASSERT_TRUE(block.ok());
    EXPECT_GE(block->address, kBase + 2 * MiB);
  }
  EXPECT_TRUE(allocator.CheckConsistency().ok());  // checks segment alignment
}

TEST(CachingAllocatorTest, BestFitTakesTheSmallestFittingBlock) {
  Recorder r;
  const uint64_t big = r.Allocate(256 * KiB);
  r.Allocate(512);  // separators keep the free blocks apart
  const uint64_t medium = r.Allocate(128 * KiB);
  r.Allocate(512);
  const uint64_t exact = r.Allocate(64 * KiB);
  r.Allocate(512);
  r.Free(big);
  r.Free(medium);
  r.Free(exact);
  r.TakeEvents();
  // Free: 256 KiB, 128 KiB, 64 KiB and the segment's tail (about 1.6 MiB).
  EXPECT_EQ(r.Allocate(100 * KiB), medium);  // not the bigger or earlier one
  EXPECT_EQ(r.Allocate(64 * KiB), exact);    // an exact fit
  EXPECT_EQ(r.Allocate(200 * KiB), big);
  EXPECT_TRUE(r.allocator().CheckConsistency().ok());
}

TEST(CachingAllocatorTest, BestFitBreaksTiesByLowestAddress) {
  Recorder r;
  const uint64_t first = r.Allocate(64 * KiB);
  r.Allocate(512);
  const uint64_t second = r.Allocate(64 * KiB);
  r.Allocate(512);
  r.Free(second);
  r.Free(first);
  EXPECT_EQ(r.Allocate(64 * KiB), first);
  EXPECT_EQ(r.Allocate(64 * KiB), second);
}

TEST(CachingAllocatorTest, SmallPoolSplitsAnyRemainderOf512BytesOrMore) {
  Recorder r;
  r.Allocate(MiB);
  r.Allocate(MiB - 512);  // leaves exactly 512 B: still split off
  r.TakeEvents();
  r.Allocate(512);        // takes those 512 B, no new segment
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 2 * MiB - 512, 512)));
}

TEST(CachingAllocatorTest, LargePoolSplitsOnlyRemaindersAboveOneMebibyte) {
  Recorder r;
  // 11 MiB in a 12 MiB segment: the 1 MiB remainder is not > 1 MiB, so the
  // tensor gets the whole block.
  const uint64_t whole = r.Allocate(11 * MiB);
  EXPECT_THAT(r.TakeEvents(),
              ElementsAre(Ev("alloc", 0, 12 * MiB), Ev("activate", 0, 12 * MiB)));
  EXPECT_EQ(r.allocator().stats().allocated_bytes, 12 * MiB);
  r.Free(whole);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("deactivate", 0, 12 * MiB)));

  // 11 MiB - 512 leaves 1 MiB + 512: split, and the remainder serves a later
  // large request of exactly that size.
  r.Allocate(11 * MiB - 512);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 0, 11 * MiB - 512)));
  r.Allocate(MiB + 512);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 11 * MiB - 512, MiB + 512)));
  EXPECT_EQ(r.allocator().stats().segment_count, 1u);
}

TEST(CachingAllocatorTest, FreedBlocksMergeWithFreeNeighbours) {
  Recorder r;
  const uint64_t a = r.Allocate(256 * KiB);
  const uint64_t b = r.Allocate(256 * KiB);
  const uint64_t c = r.Allocate(256 * KiB);
  r.Free(a);
  r.Free(c);  // merges with the segment's free tail
  EXPECT_TRUE(r.allocator().CheckConsistency().ok());
  r.TakeEvents();
  // 1 MiB does not fit in a's 256 KiB, but fits in c + tail (1.75 MiB) whose
  // block starts at c.
  EXPECT_EQ(r.Allocate(MiB), c);
  r.Free(c);
  r.Free(b);  // a + b + c + tail: the whole segment is one free block again
  EXPECT_TRUE(r.allocator().CheckConsistency().ok());
  r.TakeEvents();
  EXPECT_EQ(r.Allocate(MiB), a);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 0, MiB)));  // no alloc
}

TEST(CachingAllocatorTest, FreedBlockIsReusedWithoutANewSegment) {
  Recorder r;
  const uint64_t a = r.Allocate(30 * MiB);
  r.Free(a);
  r.TakeEvents();
  EXPECT_EQ(r.Allocate(30 * MiB), a);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 0, 30 * MiB)));
  EXPECT_EQ(r.allocator().stats().device_mallocs, 1u);
}

TEST(CachingAllocatorTest, FreeDeactivatesExactlyTheActivatedRange) {
  Recorder r;
  r.Allocate(3000);
  const uint64_t b = r.Allocate(700);
  r.TakeEvents();
  r.Free(b);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("deactivate", 3072, 1024)));
  EXPECT_EQ(r.allocator().stats().allocated_bytes, 3072u);
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 2 * MiB);  // still cached
}

TEST(CachingAllocatorTest, SegmentsAreKeptWithoutAReserveLimit) {
  Recorder r;
  r.Free(r.Allocate(50 * MiB));
  r.TakeEvents();
  r.Allocate(60 * MiB);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 50 * MiB, 60 * MiB),
                                          Ev("activate", 50 * MiB, 60 * MiB)));
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 110 * MiB);
}

TEST(CachingAllocatorTest, ReserveLimitReleasesEntirelyFreeSegmentsFirst) {
  CachingAllocatorOptions options;
  options.reserve_limit = 100 * MiB;
  Recorder r(options);
  const uint64_t kept = r.Allocate(5 * MiB);  // 20 MiB segment, partly used
  r.Free(r.Allocate(30 * MiB));               // 30 MiB segment, entirely free
  r.Free(r.Allocate(1000));                   // 2 MiB small segment, entirely free
  r.TakeEvents();
  // No cached block fits 60 MiB, and 52 + 60 > 100: both free segments go
  // (large pool first), the partly used one stays; then 20 + 60 fits.
  r.Allocate(60 * MiB);
  EXPECT_THAT(r.TakeEvents(),
              ElementsAre(Ev("free", 20 * MiB, 30 * MiB), Ev("free", 50 * MiB, 2 * MiB),
                          Ev("alloc", 52 * MiB, 60 * MiB),
                          Ev("activate", 52 * MiB, 60 * MiB)));
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 80 * MiB);
  EXPECT_EQ(r.allocator().stats().peak_reserved_bytes, 80 * MiB);
  EXPECT_EQ(r.allocator().stats().device_frees, 2u);
  // Exactly at the limit is allowed.
  r.Allocate(20 * MiB);
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 100 * MiB);
  r.Free(kept);
  EXPECT_TRUE(r.allocator().CheckConsistency().ok());
}

TEST(CachingAllocatorTest, OutOfMemoryWhenNothingCanBeReleased) {
  CachingAllocatorOptions options;
  options.reserve_limit = 64 * MiB;
  Recorder r(options);
  r.Allocate(50 * MiB);
  r.TakeEvents();
  absl::StatusOr<AllocatedBlock> block = r.allocator().Allocate(20 * MiB);
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(block.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(block.status().message(), HasSubstr("out of memory"));
  EXPECT_THAT(block.status().message(), HasSubstr("64.00 MiB limit"));
  EXPECT_TRUE(r.TakeEvents().empty());
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 50 * MiB);
  // The failure leaves the allocator usable: 50 + 2 MiB fits the limit.
  EXPECT_TRUE(r.allocator().Allocate(MiB).ok());
}

TEST(CachingAllocatorTest, EmptyCacheReleasesOnlyEntirelyFreeSegments) {
  Recorder r;
  const uint64_t a = r.Allocate(5 * MiB);
  const uint64_t b = r.Allocate(5 * MiB);
  r.Free(r.Allocate(12 * MiB));
  r.Free(a);
  r.TakeEvents();
  EXPECT_EQ(r.allocator().EmptyCache(), 12 * MiB);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("free", 20 * MiB, 12 * MiB)));
  r.Free(b);
  EXPECT_EQ(r.allocator().EmptyCache(), 20 * MiB);
  EXPECT_EQ(r.allocator().stats().reserved_bytes, 0u);
  // Released ranges are not handed out again.
  r.TakeEvents();
  r.Allocate(12 * MiB);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 32 * MiB, 12 * MiB),
                                          Ev("activate", 32 * MiB, 12 * MiB)));
}

TEST(CachingAllocatorTest, OversizeBlocksAreNotSplitWithAFiniteMaxSplitSize) {
  CachingAllocatorOptions options;
  options.max_split_size = 40 * MiB;
  Recorder r(options);
  r.Free(r.Allocate(50 * MiB));
  r.TakeEvents();
  // A request below max_split_size never takes an oversize cached block.
  r.Allocate(5 * MiB);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("alloc", 50 * MiB, 20 * MiB),
                                          Ev("activate", 50 * MiB, 5 * MiB)));
  // 45 MiB is oversize and within 20 MiB of the cached 50 MiB: whole block.
  r.Allocate(45 * MiB);
  EXPECT_THAT(r.TakeEvents(), ElementsAre(Ev("activate", 0, 50 * MiB)));
}

TEST(CachingAllocatorTest, RejectsZeroBytesAndBadFrees) {
  CachingAllocator allocator;
  EXPECT_EQ(allocator.Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<AllocatedBlock> block = allocator.Allocate(4096);
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(allocator.Free(block->address + 512).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(allocator.Free(block->address).ok());
  EXPECT_EQ(allocator.Free(block->address).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CachingAllocatorTest, TracksPeaks) {
  CachingAllocator allocator;
  absl::StatusOr<AllocatedBlock> a = allocator.Allocate(30 * MiB);
  absl::StatusOr<AllocatedBlock> b = allocator.Allocate(2 * MiB);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(allocator.Free(a->address).ok());
  const CachingAllocatorStats& stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 2 * MiB);
  EXPECT_EQ(stats.peak_allocated_bytes, 32 * MiB);
  EXPECT_EQ(stats.reserved_bytes, 50 * MiB);  // 30 MiB + a 20 MiB segment
  EXPECT_EQ(stats.peak_reserved_bytes, 50 * MiB);
  EXPECT_EQ(stats.segment_count, 2u);
  EXPECT_EQ(stats.active_block_count, 1u);
}

}  // namespace
}  // namespace umlab
