// The fault-service engine on the sim backend, on hand-built programs whose
// right answers are worked out in the comments.
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "core/policy.h"
#include "policies/demand/demand.h"
#include "policies/ideal/ideal.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr uint64_t kBlock = kBlockSize;

// Four blocks are written (first touch: zero-filled, so dirty), then read.
ProgramBuilder WriteThenRead() {
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Iteration(0).Kernel(1, 1000000, {0, 1, 2, 3}, /*write=*/true);
  p.Iteration(1).Kernel(2, 1000000, {0, 1, 2, 3});
  return p;
}

TEST(FaultServiceTest, EvictsLeastRecentlyMigratedAndWritesBackOnlyDirtyPages) {
  DemandPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), /*capacity_frames=*/2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const RunStats& s = run.stats;
  // Kernel 1 zero-fills all four blocks; blocks 0 and 1 are evicted (dirty)
  // to make room for 2 and 3. Kernel 2 brings 0..3 back by copy, evicting
  // 2 and 3 (dirty, written in kernel 1) and then 0 and 1 (clean: only read
  // since they were copied in), which need no write-back.
  EXPECT_EQ(s.zero_filled_bytes, 4 * kBlock);
  EXPECT_EQ(s.h2d_bytes, 4 * kBlock);
  EXPECT_EQ(s.fault_migrated_bytes, 4 * kBlock);
  EXPECT_EQ(s.d2h_bytes, 4 * kBlock);
  EXPECT_EQ(s.evictions, 6u);
  EXPECT_EQ(s.evicted_bytes, 6 * kBlock);
  EXPECT_EQ(s.invalidated_bytes, 0u);
  EXPECT_EQ(s.prefetch_bytes, 0u);
  // Four SMs fault together and retry together: every page faults once, in
  // batches of four, with no duplicates.
  EXPECT_EQ(s.faulted_pages, 8u * kPagesPerBlock);
  EXPECT_EQ(s.faults, 8u * kPagesPerBlock);
  EXPECT_EQ(s.fault_batches, 8u * kPagesPerBlock / 4);
  EXPECT_EQ(s.peak_used_frames, 2u);
  EXPECT_EQ(s.page_accesses, 8u * kPagesPerBlock);
  EXPECT_EQ(s.kernels, 2u);
  EXPECT_EQ(s.ideal_time_ns, 2000000);
  EXPECT_GT(s.time_ns, s.ideal_time_ns);
  ASSERT_EQ(s.per_iteration.size(), 2u);
  EXPECT_EQ(s.per_iteration[0].d2h_bytes, 2 * kBlock);
  EXPECT_EQ(s.per_iteration[1].h2d_bytes, 4 * kBlock);
}

TEST(FaultServiceTest, FullCapacityFaultsOnlyOnFirstTouch) {
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Iteration(0).Kernel(1, 1000000, {0, 1, 2, 3}, true);
  p.Iteration(1).Kernel(2, 1000000, {0, 1, 2, 3});
  p.Iteration(2).Kernel(2, 1000000, {0, 1, 2, 3});
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.evictions, 0u);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);  // first touch zero-fills
  ASSERT_EQ(run.stats.per_iteration.size(), 3u);
  EXPECT_GT(run.stats.per_iteration[0].faults, 0u);
  EXPECT_EQ(run.stats.per_iteration[1].faults, 0u);
  EXPECT_EQ(run.stats.per_iteration[2].faults, 0u);
  // With everything resident a kernel takes exactly its compute time:
  // 4 SMs share 2048 accesses at 1 ms * 4 / 2048 each.
  EXPECT_EQ(run.stats.per_iteration[1].time_ns, 1000000);
  EXPECT_EQ(run.stats.per_iteration[2].time_ns, 1000000);
}

TEST(FaultServiceTest, TransfersOverlapComputeAndStallAccountsTheRest) {
  // One SM, one block read after a write-back: 512 faults, each bringing
  // one page (4096 ns at 1 GB/s), with 1 us of compute per access.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 512000, {0}, true).Kernel(2, 512000, {1}, true);
  p.Iteration(0).Kernel(3, 512000, {0});
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 1, policy, TestDevice(/*sms=*/1));
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.stats.per_iteration.size(), 1u);
  const IterationStats& it = run.stats.per_iteration[0];
  EXPECT_EQ(it.faults, 512u);
  // Evicting block 1 (dirty, 2 MiB = 2097152 ns) must finish before block 0's
  // first page can land; then each page costs its 4096 ns copy, and the SM
  // computes 1000 ns per access.
  EXPECT_EQ(it.time_ns, 2097152 + 512 * 4096 + 512 * 1000);
  EXPECT_EQ(it.stall_ns, 2097152 + 512 * 4096);
}

TEST(FaultServiceTest, IdealIgnoresCapacity) {
  IdealPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.evictions, 0u);
  EXPECT_EQ(run.stats.per_iteration[1].faults, 0u);
  EXPECT_EQ(run.stats.peak_used_frames, 4u);
}

TEST(FaultServiceTest, FreeingASegmentDropsItsPagesWithoutWriteBack) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0, 1}, true);
  p.Free(1, 1);
  p.Kernel(2, 1000, {0});
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.invalidated_bytes, kBlock);
  EXPECT_EQ(run.stats.d2h_bytes, 0u);
  EXPECT_EQ(run.stats.evictions, 0u);
}

// Refuses every victim: the run must end in a clear error, not hang.
class RefusingPolicy final : public Policy {
 public:
  std::optional<BlockNumber> ChooseVictim(const VictimQuery&) override { return std::nullopt; }
};

TEST(FaultServiceTest, UnserviceableFaultsAreReportedAsDeadlock) {
  RefusingPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), 1, policy);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(run.status.message().find("deadlock"), std::string::npos) << run.status;
}

TEST(FaultServiceTest, FaultBufferOverflowLosesEntriesButNoData) {
  DeviceConfig device = TestDevice(/*sms=*/16);
  device.fault_buffer_entries = 3;
  DemandPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), 2, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_GT(run.stats.dropped_faults, 0u);
  // Overflowed accessors fault again after replay: the same data moves.
  EXPECT_EQ(run.stats.h2d_bytes, 4 * kBlock);
  EXPECT_EQ(run.stats.d2h_bytes, 4 * kBlock);
  EXPECT_EQ(run.stats.page_accesses, 8u * kPagesPerBlock);
}

TEST(FaultServiceTest, EveryReplayPolicyServicesTheSameData) {
  for (ReplayPolicy replay : {ReplayPolicy::kBatch, ReplayPolicy::kBlock, ReplayPolicy::kOnce}) {
    DemandPolicy policy;
    const SimRun run = RunOnSim(WriteThenRead(), 2, policy, TestDevice(8), replay);
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.stats.h2d_bytes, 4 * kBlock);
    EXPECT_EQ(run.stats.page_accesses, 8u * kPagesPerBlock);
    EXPECT_EQ(run.stats.faulted_pages, 8u * kPagesPerBlock) << static_cast<int>(replay);
  }
}

// Brings the whole block on any fault: the extra pages are prefetch traffic.
class WholeBlockPolicy final : public Policy {
 public:
  PageMask ExpandFault(BlockNumber, const PageMask&) override { return FullPageMask(); }
};

TEST(FaultServiceTest, FaultExpansionCountsAsUsefulPrefetch) {
  WholeBlockPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // The four SMs fault on four pages of a block at once; the other 508
  // pages ride along. Only kernel 2 copies (kernel 1 zero-fills).
  EXPECT_EQ(run.stats.faulted_pages, 8u * 4);
  EXPECT_EQ(run.stats.h2d_bytes, 4 * kBlock);
  EXPECT_EQ(run.stats.fault_migrated_bytes, 4 * 4 * kPageSize);
  EXPECT_EQ(run.stats.prefetch_bytes, 4 * (kBlock - 4 * kPageSize));
  EXPECT_EQ(run.stats.prefetch_useful_bytes, run.stats.prefetch_bytes);
}

// Prefetches the next block of a fixed schedule at each kernel begin, and
// drops inactive pages of victims: exercises the PolicyContext paths.
class SchedulePolicy final : public Policy {
 public:
  explicit SchedulePolicy(std::vector<int> schedule) : schedule_(std::move(schedule)) {}
  void OnKernelBegin(uint32_t exec_id) override {
    ++kernels_seen_;
    for (int block : schedule_) {
      context().Prefetch(BlockOfAddress(ProgramBuilder::BlockAddress(block)), FullPageMask(),
                         exec_id);
    }
  }
  void OnAllocatorEvent(const Event& event) override {
    if (event.kind == EventKind::kDeactivate) ++deactivations_;
  }
  PageMask PagesToDrop(const BlockState& victim) override { return victim.inactive; }
  int kernels_seen_ = 0;
  int deactivations_ = 0;

 private:
  std::vector<int> schedule_;
};

TEST(FaultServiceTest, PrefetchedDataArrivesBeforeTheKernelNeedsIt) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0, 1}, true);
  p.Kernel(2, 1000, {0, 1});  // evicts nothing: capacity 2
  SchedulePolicy policy({0, 1});
  const SimRun run = RunOnSim(p, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(policy.kernels_seen_, 2);
  // Kernel 1's prefetches zero-fill both blocks (no bytes to copy); kernel
  // 2 finds them resident and the second batch of requests is skipped.
  EXPECT_EQ(run.stats.prefetch_requests, 4u);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, 2 * kBlock);
}

TEST(FaultServiceTest, InactivePagesOfAVictimAreDroppedAndComeBackAsZeroFill) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0}, true);
  // The tensor in block 0 is freed: its bytes are garbage now.
  p.Deactivate(ProgramBuilder::BlockAddress(0), kBlock);
  p.Kernel(2, 1000, {1}, true);  // evicts block 0: dropped, not written back
  p.Activate(ProgramBuilder::BlockAddress(0), kBlock);
  p.Kernel(3, 1000, {0}, true);  // re-populated by zero-fill, no copy
  SchedulePolicy policy({});
  const SimRun run = RunOnSim(p, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(policy.deactivations_, 1);
  EXPECT_EQ(run.stats.invalidated_bytes, kBlock);
  EXPECT_EQ(run.stats.d2h_bytes, kBlock);  // only block 1, evicted for kernel 3
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, 3 * kBlock);
}

TEST(FaultServiceTest, SameProgramGivesIdenticalResults) {
  DemandPolicy a, b;
  const SimRun first = RunOnSim(WriteThenRead(), 2, a, TestDevice(7));
  const SimRun second = RunOnSim(WriteThenRead(), 2, b, TestDevice(7));
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.stats.time_ns, second.stats.time_ns);
  EXPECT_EQ(first.stats.faults, second.stats.faults);
  EXPECT_EQ(first.stats.stall_ns, second.stats.stall_ns);
}

TEST(FaultServiceTest, MalformedProgramsAreRejected) {
  ProgramBuilder p;
  p.Alloc(0, 1).Begin(1, 10).Access(ProgramBuilder::BlockAddress(0), 4096, false);
  DemandPolicy policy;
  const SimRun unterminated = RunOnSim(p, 1, policy);
  EXPECT_EQ(unterminated.status.code(), absl::StatusCode::kInvalidArgument);
  ProgramBuilder q;
  q.Alloc(0, 1).Access(ProgramBuilder::BlockAddress(0), 4096, false);
  const SimRun stray = RunOnSim(q, 1, policy);
  EXPECT_EQ(stray.status.code(), absl::StatusCode::kInvalidArgument);
}

// The test device with storage behind it: a host line of one block, and a
// drive at a quarter of the link in and an eighth out, with no latency.
DeviceConfig DeviceWithStorage() {
  DeviceConfig device = TestDevice();
  device.link.storage = StorageConfig{true, 0.25e9, 0.125e9, 0, 0};
  device.host_memory_bytes = kBlock;
  return device;
}

TEST(FaultServiceTest, EvictionsPastTheHostLineGoToStorageAndComeBackFromIt) {
  DemandPolicy policy;
  const SimRun run = RunOnSim(WriteThenRead(), /*capacity_frames=*/2, policy, DeviceWithStorage());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const RunStats& s = run.stats;
  // Behind a storage tier a migration moves the data, so every eviction
  // writes its block back and the host holds only what is off the device.
  // The host takes one block. Kernel 1: 0 is evicted to the host (now at
  // its line), 1 to storage. Kernel 2, faulting on 0, 1, 2, 3 in turn: 2 is
  // evicted to storage (the host still holds 0), then 0 comes back from the
  // host; 3 is evicted to the host, now empty, and 1 comes back from
  // storage; 0 is evicted to storage (the host holds 3) and 2 comes back
  // from it; 1 is evicted to storage and 3 comes back from the host.
  EXPECT_EQ(s.d2h_bytes, 6 * kBlock);
  EXPECT_EQ(s.storage_write_bytes, 4 * kBlock);
  EXPECT_EQ(s.h2d_bytes, 4 * kBlock);
  EXPECT_EQ(s.storage_read_bytes, 2 * kBlock);
  EXPECT_EQ(s.peak_host_bytes, kBlock);
  EXPECT_EQ(s.peak_storage_bytes, 2 * kBlock);
  // The same program without storage keeps clean pages' host copies.
  DemandPolicy host_only;
  const SimRun plain = RunOnSim(WriteThenRead(), 2, host_only);
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  EXPECT_EQ(plain.stats.d2h_bytes, 4 * kBlock);
  EXPECT_EQ(plain.stats.storage_write_bytes, 0u);
  EXPECT_EQ(plain.stats.peak_host_bytes, 4 * kBlock);
  // Each storage read and write takes 4x and 8x a host transfer's 2.097 ms.
  EXPECT_GT(s.time_ns, plain.stats.time_ns + 2 * 3 * 2097152 + 4 * 7 * 2097152);
}

// Demand paging that sends every victim to storage (the base class's
// decisions are the engine's defaults: the faulted pages, the oldest victim).
class StorageFirst : public Policy {
 public:
  MemoryTier EvictTo(const BlockState& /*victim*/) override { return MemoryTier::kStorage; }
};

TEST(FaultServiceTest, APolicyMaySendVictimsToStorageBelowTheHostLine) {
  StorageFirst policy;
  DeviceConfig device = DeviceWithStorage();
  device.host_memory_bytes = 1ull << 30;  // room for every block on the host
  const SimRun run = RunOnSim(WriteThenRead(), 2, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // All six evictions (every page written back) and the four returns.
  EXPECT_EQ(run.stats.storage_write_bytes, 6 * kBlock);
  EXPECT_EQ(run.stats.storage_read_bytes, 4 * kBlock);
  EXPECT_EQ(run.stats.peak_host_bytes, 0u);
}

TEST(FaultServiceTest, FreedMemoryReleasesItsCopies) {
  // Four blocks written, then freed and allocated again: the copies of the
  // two written back are gone, so the second kernel zero-fills all four.
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Iteration(0).Kernel(1, 1000000, {0, 1, 2, 3}, /*write=*/true);
  p.Free(0, 4);
  p.Alloc(0, 4);
  p.Iteration(1).Kernel(2, 1000000, {0, 1, 2, 3}, /*write=*/true);
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 2, policy, DeviceWithStorage());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, 8 * kBlock);
}

// Acts at the start of chosen kernels (counted from 0): the PolicyContext
// requests a planning policy makes, one at a time.
class ActsAtKernels final : public Policy {
 public:
  using Action = std::function<void(PolicyContext&)>;
  explicit ActsAtKernels(std::map<int, Action> actions) : actions_(std::move(actions)) {}
  void OnKernelBegin(uint32_t /*exec_id*/) override {
    if (auto it = actions_.find(kernel_++); it != actions_.end()) it->second(context());
  }

 private:
  std::map<int, Action> actions_;
  int kernel_ = 0;
};

BlockNumber Block(int index) { return BlockOfAddress(ProgramBuilder::BlockAddress(index)); }

TEST(FaultServiceTest, PreEvictingPartOfABlockKeepsItsFrameAndTheRest) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 1000, {0}, /*write=*/true);
  p.Begin(2, 1000).Access(ProgramBuilder::BlockAddress(0) + kBlock / 2, kBlock / 2, false).End(2);
  p.Kernel(3, 1000, {0});
  const PageMask first_half = PageRangeMask(0, kPagesPerBlock / 2);
  ActsAtKernels policy({{1, [&](PolicyContext& c) {
                           c.PreEvictPages(Block(0), first_half, MemoryTier::kHost);
                         }}});
  const SimRun run = RunOnSim(p, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // Half the block goes home; kernel 2 reads the other half without a
  // fault; kernel 3 faults the first half back into the same frame.
  EXPECT_EQ(run.stats.pre_evictions, 1u);
  EXPECT_EQ(run.stats.d2h_bytes, kBlock / 2);
  EXPECT_EQ(run.stats.h2d_bytes, kBlock / 2);
  EXPECT_EQ(run.stats.faulted_pages, kPagesPerBlock + kPagesPerBlock / 2u);
  EXPECT_EQ(run.stats.peak_used_frames, 1u);
}

TEST(FaultServiceTest, DiscardDropsOnlyWhatTheAllocatorFreed) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0}, /*write=*/true);
  p.Deactivate(ProgramBuilder::BlockAddress(0), kBlock / 2);  // the first half dies
  p.Kernel(2, 1000, {});
  p.Kernel(3, 1000, {1}, /*write=*/true);  // evicts block 0
  ActsAtKernels policy({{1, [&](PolicyContext& c) { c.Discard(Block(0), FullPageMask()); }}});
  const SimRun run = RunOnSim(p, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // The dead half leaves at once with no write-back; the live half is
  // written back when block 1 needs the frame.
  EXPECT_EQ(run.stats.invalidated_bytes, kBlock / 2);
  EXPECT_EQ(run.stats.d2h_bytes, kBlock / 2);
}

TEST(FaultServiceTest, APrefetchTouchedAndThenDiscardedWasUseful) {
  // Block 0 is written, pre-evicted, prefetched back and read; then the
  // tensor dies and is discarded. The prefetch brought what the kernel
  // read, so it counts as useful, as it would if evicted instead.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 1000, {0}, /*write=*/true);
  p.Kernel(2, 10000000, {});
  p.Kernel(3, 1000, {0});
  p.Deactivate(ProgramBuilder::BlockAddress(0), kBlock);
  p.Kernel(4, 1000, {});
  ActsAtKernels policy(
      {{1, [](PolicyContext& c) { c.PreEvictPages(Block(0), FullPageMask(), MemoryTier::kHost); }},
       {2, [](PolicyContext& c) { c.Prefetch(Block(0), FullPageMask(), 3); }},
       {3, [](PolicyContext& c) { c.Discard(Block(0), FullPageMask()); }}});
  const SimRun run = RunOnSim(p, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.prefetch_bytes, kBlock);
  EXPECT_EQ(run.stats.invalidated_bytes, kBlock);
  EXPECT_EQ(run.stats.prefetch_useful_bytes, kBlock);
}

TEST(FaultServiceTest, PopulatingMovesNoBytesAndDoesNotWaitBehindPrefetches) {
  // Kernel 1 writes blocks 0-4, pre-evicted when kernel 2 starts. When
  // kernel 3 starts, five prefetches of them queue (2.1 ms each, four in
  // flight at most, so the fifth is issued only after 2.1 ms) and block 6
  // is populated. Kernel 4, 3 ms later, writes block 6: it is resident,
  // where a populate queued behind the prefetches would still be waiting.
  ProgramBuilder p;
  p.Alloc(0, 7);
  p.Kernel(1, 1000, {0, 1, 2, 3, 4}, /*write=*/true);
  p.Kernel(2, 20000000, {5});
  p.Kernel(3, 3000000, {});
  p.Kernel(4, 10000000, {6}, /*write=*/true);
  ActsAtKernels policy(
      {{1, [](PolicyContext& c) {
          for (int b = 0; b < 5; ++b) c.PreEvictPages(Block(b), FullPageMask(), MemoryTier::kHost);
        }},
       {2, [](PolicyContext& c) {
          for (int b = 0; b < 5; ++b) c.Prefetch(Block(b), FullPageMask(), 3);
          c.Populate(Block(6), FullPageMask());
          c.Populate(Block(0), FullPageMask());  // has data: left to the prefetch
        }}});
  const SimRun run = RunOnSim(p, 7, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faulted_pages, 6 * uint64_t{kPagesPerBlock});  // kernels 1 and 2 only
  EXPECT_EQ(run.stats.h2d_bytes, 5 * kBlock);
  EXPECT_EQ(run.stats.prefetch_bytes, 5 * kBlock);
  EXPECT_EQ(run.stats.zero_filled_bytes, 7 * kBlock);
}

}  // namespace
}  // namespace umlab::testing
