// The sim's `policy_from=user` mode: the policy acting from user space over
// a modelled unmodified driver, as the cuda backend runs it. Hand-built
// programs on the round-numbered test device (1 GB/s: a 2 MiB copy takes
// 2.097 ms), every invariant checked after every engine step.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/runner/experiment.h"
#include "core/policy.h"
#include "emu/device_presets.h"
#include "policies/demand/demand.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr uint64_t kBlock = kBlockSize;
const SimOptions kUserMode{.policy_from_user = true};
// The engine hearing everything through CUPTI, in one stream, as the cuda
// backend's transfers=cupti: the tests of the driver's mechanisms below
// count what the engine heard of them in the driver's order.
const SimOptions kUserModeThroughCupti{.policy_from_user = true, .transfers_from_queue = false};

// CUPTI's delivery with every record handed over by the first flush after
// its collection, as if its buffer were full: the tests of timing below
// make too few records to fill one.
CuptiRecordStreamConfig Unbuffered(Nanos collect_period) {
  return {.collect_period_ns = collect_period, .buffer_records = 0};
}

// Never gives up a block: inside the driver nothing can be evicted.
class RefusingPolicy final : public Policy {
 public:
  std::optional<BlockNumber> ChooseVictim(const VictimQuery&) override { return std::nullopt; }
};

TEST(SimUserModeTest, TheDriverMakesRoomWhateverThePolicySays) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 1000, {0}, true);
  p.Kernel(2, 1000, {1}, true);
  p.Kernel(3, 1000, {0});     // a hit: the driver does not see GPU accesses
  p.Kernel(4, 1000, {2}, true);  // evicts the oldest arrival, block 0
  p.Kernel(5, 1000, {1});     // still resident: no fault
  p.Kernel(6, 1000, {0});     // faults again, evicting block 1
  RefusingPolicy refusing;
  const SimRun inside = RunOnSim(p, 2, refusing);
  EXPECT_EQ(inside.status.code(), absl::StatusCode::kFailedPrecondition) << inside.status;

  RefusingPolicy policy;
  const SimRun run =
      RunOnSim(p, 2, policy, TestDevice(), ReplayPolicy::kBatch, kUserModeThroughCupti);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faulted_blocks, 4u);  // 0, 1, 2, then 0 again
  EXPECT_EQ(run.stats.device_evictions, 2u);
  EXPECT_EQ(run.stats.evictions, 2u);
  EXPECT_EQ(run.stats.pre_evictions, 0u);
}

TEST(SimUserModeTest, TheDriverWritesBackEveryPageItHolds) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0}, true);
  p.Kernel(2, 1000, {1}, true);  // evicts block 0 (written)
  p.Kernel(3, 1000, {0});        // evicts block 1 (written); block 0 comes back clean
  p.Kernel(4, 1000, {1});        // evicts block 0, clean: the driver copies it anyway
  DemandPolicy inside_policy, user_policy;
  const SimRun inside = RunOnSim(p, 1, inside_policy);
  const SimRun user =
      RunOnSim(p, 1, user_policy, TestDevice(), ReplayPolicy::kBatch, kUserModeThroughCupti);
  ASSERT_TRUE(inside.status.ok()) << inside.status;
  ASSERT_TRUE(user.status.ok()) << user.status;
  EXPECT_EQ(inside.stats.d2h_bytes, 2 * kBlock);
  EXPECT_EQ(user.stats.d2h_bytes, 3 * kBlock);
  EXPECT_EQ(inside.stats.h2d_bytes, user.stats.h2d_bytes);
  EXPECT_EQ(user.stats.device_evictions, 3u);
}

// With the driver's transfers heard from its event queue (the default, as
// on the cuda backend), an eviction reaches the engine within a poll, while
// a populate, which copies nothing, is heard only through CUPTI's fault
// record, later. A populate's record that comes after its block's eviction
// is over: the block has left since.
TEST(SimUserModeTest, APopulateHeardAfterItsBlocksEvictionIsOver) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 1000, {0}, true);  // populates
  p.Kernel(2, 1000, {1}, true);  // populates
  p.Kernel(3, 1000, {2}, true);  // populates, evicting block 0
  p.Kernel(4, 1000, {0});        // copies block 0 back, evicting block 1
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 2, policy, TestDevice(), ReplayPolicy::kBatch, kUserMode);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // The queue tells of block 0's eviction, of its copy back and of block
  // 1's eviction long before CUPTI's first collection (16 ms) brings the
  // fault records: of those, the populates of blocks 0 and 1 are older than
  // their evictions and are dropped, so the engine holds what the driver
  // holds, blocks 0 (copied) and 2 (populated), and saw no eviction of a
  // block it held.
  EXPECT_EQ(run.stats.faulted_blocks, 2u);
  EXPECT_EQ(run.stats.device_evictions, 0u);
  EXPECT_EQ(run.stats.d2h_bytes, 2 * kBlock);  // the driver wrote both back
  // Heard through CUPTI in the driver's order, every arrival and eviction
  // counts.
  DemandPolicy cupti_policy;
  const SimRun cupti =
      RunOnSim(p, 2, cupti_policy, TestDevice(), ReplayPolicy::kBatch, kUserModeThroughCupti);
  ASSERT_TRUE(cupti.status.ok()) << cupti.status;
  EXPECT_EQ(cupti.stats.faulted_blocks, 4u);
  EXPECT_EQ(cupti.stats.device_evictions, 2u);
}

TEST(SimUserModeTest, TheDriversFaultPathCopiesAtItsOwnRateInBothModes) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0}, true);
  p.Kernel(2, 1000, {1}, true);  // evicts block 0, written
  p.Kernel(3, 1000, {0});        // the fault path copies it back: 2 MiB
  DeviceConfig slow_faults = TestDevice();
  slow_faults.link.fault_h2d_bytes_per_second = 0.5e9;  // half the link's rate
  for (const SimOptions& options : {SimOptions{}, kUserMode}) {
    DemandPolicy at_link_rate, at_fault_rate;
    const SimRun fast =
        RunOnSim(p, 1, at_link_rate, TestDevice(), ReplayPolicy::kBatch, options);
    const SimRun slow = RunOnSim(p, 1, at_fault_rate, slow_faults, ReplayPolicy::kBatch, options);
    ASSERT_TRUE(fast.status.ok()) << fast.status;
    ASSERT_TRUE(slow.status.ok()) << slow.status;
    EXPECT_EQ(slow.stats.h2d_bytes, fast.stats.h2d_bytes);
    // The first two kernels populate (nothing to copy); the one copy takes
    // twice as long.
    EXPECT_EQ(slow.stats.time_ns - fast.stats.time_ns, 2097152)
        << "policy_from_user " << options.policy_from_user;
  }
}

TEST(SimUserModeTest, TheDriversFaultPathPaysItsOverheadForEveryMigrationInBothModes) {
  // Two kernels that only zero-fill, one block each (the second evicts the
  // first, whose written pages are copied out, not in): every migration of
  // the fault path pays the overhead though none copies a byte.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 1000, {0}, true);
  p.Kernel(2, 1000, {1}, true);
  DeviceConfig costly_faults = TestDevice();
  costly_faults.link.fault_block_overhead_ns = 100000;
  for (const SimOptions& options : {SimOptions{}, kUserMode}) {
    DemandPolicy free_policy, costly_policy;
    const SimRun free = RunOnSim(p, 1, free_policy, TestDevice(), ReplayPolicy::kBatch, options);
    const SimRun costly =
        RunOnSim(p, 1, costly_policy, costly_faults, ReplayPolicy::kBatch, options);
    ASSERT_TRUE(free.status.ok()) << free.status;
    ASSERT_TRUE(costly.status.ok()) << costly.status;
    EXPECT_EQ(costly.stats.h2d_bytes, 0u);
    EXPECT_EQ(costly.stats.fault_batches, free.stats.fault_batches);
    const Nanos extra = costly.stats.time_ns - free.stats.time_ns;
    // Each migration on the critical path, so whole overheads only.
    EXPECT_EQ(extra % 100000, 0) << "policy_from_user " << options.policy_from_user;
    if (options.policy_from_user) {
      // The driver's own fault service migrates at least once a batch.
      EXPECT_GE(extra, static_cast<Nanos>(free.stats.fault_batches) * 100000);
    } else {
      // One block a kernel: one migration a batch.
      EXPECT_EQ(extra, static_cast<Nanos>(free.stats.fault_batches) * 100000);
    }
  }
}

// When kernel 3 begins, prefetches block 1, which kernel 4 reads; kernel 3
// faults block 0 in meanwhile.
class PrefetchTheNextBlock final : public Policy {
 public:
  void OnKernelBegin(uint32_t exec_id) override {
    if (exec_id == 3) {
      context().Prefetch(BlockOfAddress(ProgramBuilder::BlockAddress(1)), FullPageMask(),
                         exec_id);
    }
  }
};

TEST(SimUserModeTest, APolicysPrefetchMovesBesideTheFaultPathWhenTheDeviceSaysSo) {
  // Blocks 0 and 1 are written, then written back for blocks 2 and 3.
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Kernel(1, 1000, {0, 1}, true);
  p.Kernel(2, 1000, {2, 3}, true);
  p.Kernel(3, 1000, {0});
  p.Kernel(4, 1000, {1});
  DeviceConfig beside = TestDevice();
  beside.link.full_duplex = false;
  DeviceConfig one_lane = beside;
  beside.link.prefetch_calls_beside_faults = true;
  PrefetchTheNextBlock serial_policy, beside_policy;
  const SimRun serial = RunOnSim(p, 2, serial_policy, one_lane, ReplayPolicy::kBatch, kUserMode);
  const SimRun overlapped =
      RunOnSim(p, 2, beside_policy, beside, ReplayPolicy::kBatch, kUserMode);
  ASSERT_TRUE(serial.status.ok()) << serial.status;
  ASSERT_TRUE(overlapped.status.ok()) << overlapped.status;
  EXPECT_EQ(overlapped.stats.h2d_bytes, serial.stats.h2d_bytes);
  EXPECT_EQ(serial.stats.h2d_bytes, 2 * kBlockSize);  // blocks 0 and 1, once each
  // Kernel 3's faults no longer wait behind the 2 MiB prefetch (without
  // the prefetch the two runs would take the same time).
  EXPECT_LT(overlapped.stats.time_ns, serial.stats.time_ns);
}

// When kernel 2 begins, prefetches block 3 (the driver makes room by
// evicting block 0, the oldest arrival); when kernel 4 begins, while that
// prefetch still runs, pre-evicts block 0, whose first half the allocator
// has let go of, dropping that half or not.
class PrefetchThenPreEvict final : public Policy {
 public:
  explicit PrefetchThenPreEvict(bool drop_garbage) : drop_garbage_(drop_garbage) {}
  void OnKernelBegin(uint32_t exec_id) override {
    if (exec_id == 2) {
      context().Prefetch(BlockOfAddress(ProgramBuilder::BlockAddress(3)), FullPageMask(),
                         exec_id);
    } else if (exec_id == 4) {
      context().PreEvict(BlockOfAddress(ProgramBuilder::BlockAddress(0)));
    }
  }
  PageMask PagesToDrop(const BlockState& victim) override {
    return drop_garbage_ ? victim.inactive : PageMask();
  }

 private:
  bool drop_garbage_;
};

TEST(SimUserModeTest, ADiscardReachesTheCopyTheDriverWroteBack) {
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Kernel(1, 1000, {3}, true);     // block 3 holds data...
  p.Kernel(5, 1000, {0, 1}, true);  // ...on the host, once 0 and 1 come
  // Long enough for CUPTI's records to reach the engine: it knows blocks 0
  // and 1 are on the device.
  p.Kernel(9, 30'000'000, {1});
  p.Deactivate(ProgramBuilder::BlockAddress(0), kBlock / 2);
  p.Kernel(2, 1000, {1});
  p.Kernel(4, 1000, {1});
  p.Kernel(6, 30'000'000, {1});
  p.Kernel(3, 1000, {0});  // block 0 comes back
  const SimOptions options{.policy_from_user = true,
                           .cupti = Unbuffered(16'000'000),
                           .transfers_from_queue = false};
  PrefetchThenPreEvict dropping(true), keeping(false);
  const SimRun dropped = RunOnSim(p, 2, dropping, TestDevice(), ReplayPolicy::kBatch, options);
  const SimRun kept = RunOnSim(p, 2, keeping, TestDevice(), ReplayPolicy::kBatch, options);
  ASSERT_TRUE(dropped.status.ok()) << dropped.status;
  ASSERT_TRUE(kept.status.ok()) << kept.status;
  // The driver wrote block 0 back, whole, to make room for the prefetch,
  // before the pre-eviction's turn came: the call moved nothing either way.
  EXPECT_EQ(dropped.stats.d2h_bytes, kept.stats.d2h_bytes);
  EXPECT_EQ(dropped.stats.call_d2h_bytes, 0u);
  EXPECT_EQ(kept.stats.call_d2h_bytes, 0u);
  // The prefetch copied block 3 in; block 0 came back through the fault path.
  EXPECT_EQ(dropped.stats.call_h2d_bytes, kBlock);
  EXPECT_EQ(kept.stats.call_h2d_bytes, kBlock);
  EXPECT_EQ(dropped.stats.invalidated_bytes, kBlock / 2);
  // The discard of its garbage half reached the host's copy: that half is
  // populated when block 0 comes back, not copied.
  EXPECT_EQ(kept.stats.h2d_bytes - dropped.stats.h2d_bytes, kBlock / 2);
}

// On the H200 a pre-eviction that writes half a block back and discards
// the other half leaves that half on the device: the block keeps its frame
// until the driver evicts it, and that eviction writes the half back
// (docs/fidelity.md, "What a partial discard leaves").
TEST(SimUserModeTest, APartialDiscardStaysOnTheDeviceUntilTheDriverEvictsIt) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 1000, {0, 1}, true);
  p.Kernel(9, 30'000'000, {1});  // the engine hears of blocks 0 and 1
  p.Deactivate(ProgramBuilder::BlockAddress(0), kBlock / 2);
  p.Kernel(4, 1000, {1});  // pre-evicts block 0, dropping its first half
  p.Kernel(6, 30'000'000, {1});
  p.Kernel(7, 1000, {2}, true);  // block 2 needs a frame
  const auto run = [&](bool stay) {
    SimOptions options{.policy_from_user = true, .cupti = Unbuffered(0)};
    options.partial_discards_stay = stay;
    PrefetchThenPreEvict dropping(true);
    const SimRun result = RunOnSim(p, 2, dropping, TestDevice(), ReplayPolicy::kBatch, options);
    EXPECT_TRUE(result.status.ok()) << result.status;
    return result.stats;
  };
  const RunStats stays = run(true);
  const RunStats goes = run(false);
  // The call wrote the live half back either way.
  EXPECT_EQ(stays.call_d2h_bytes, kBlock / 2);
  EXPECT_EQ(goes.call_d2h_bytes, kBlock / 2);
  // Where the discarded half stayed, block 2 found the device full, and the
  // driver wrote that half back to make room.
  EXPECT_EQ(goes.d2h_bytes, kBlock / 2);
  EXPECT_EQ(stays.d2h_bytes, kBlock);
  EXPECT_EQ(goes.device_evictions, 0u);
}

// Prefetches `blocks`, in order, when kernel `trigger` begins.
class PrefetchAtKernel final : public Policy {
 public:
  PrefetchAtKernel(uint32_t trigger, std::vector<int> blocks)
      : trigger_(trigger), blocks_(std::move(blocks)) {}
  void OnKernelBegin(uint32_t exec_id) override {
    if (exec_id != trigger_) return;
    for (int block : blocks_) {
      context().Prefetch(BlockOfAddress(ProgramBuilder::BlockAddress(block)), FullPageMask(),
                         exec_id);
    }
  }

 private:
  uint32_t trigger_;
  std::vector<int> blocks_;
};

TEST(SimUserModeTest, CallsGoOneAtATimeAndAFaultOvertakesAQueuedPrefetch) {
  ProgramBuilder p;
  p.Alloc(1, 8);
  p.Iteration(0);
  p.Kernel(1, 1000, {1, 2, 3, 4}, true);
  p.Kernel(2, 1000, {5, 6, 7, 8}, true);  // capacity 4: blocks 1-4 go to the host
  // Long enough for CUPTI's records of all that to reach the engine (a
  // flush every 3 ms, each delivering 2 ms after it began): the policy
  // then knows blocks 1-4 are gone.
  p.Kernel(9, 30'000'000, {8});
  p.Iteration(1);
  p.Kernel(3, 1000, {4});  // wants the last of four queued prefetches
  PrefetchAtKernel policy(3, {1, 2, 3, 4});
  // (Its few records fill no CUPTI buffer: they are taken as full.)
  const SimOptions options{.policy_from_user = true,
                           .cupti = Unbuffered(16'000'000),
                           .transfers_from_queue = false};
  const SimRun run = RunOnSim(p, 4, policy, TestDevice(), ReplayPolicy::kBatch, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.stats.per_iteration.size(), 2u);
  // The calls run one at a time, each after the driver's eviction for it,
  // so block 4's call would land after 8 transfers (16.8 ms). The fault on
  // block 4 makes the driver move it at once instead: it follows block 1's
  // call on the link and lands after 3 transfers (6.3 ms).
  const Nanos kernel3 = run.stats.per_iteration[1].time_ns;
  EXPECT_GT(kernel3, 6'291'000);
  EXPECT_LT(kernel3, 6'400'000);
  // The engine asked for all four. By the program's end the link had
  // carried block 1's call, the driver's copy of block 4 and block 2's call
  // (issued when block 1's finished); blocks 3 and 4's calls were still
  // queued, and block 4's would have found it there and moved nothing.
  EXPECT_EQ(run.stats.prefetch_bytes, 4 * kBlock);
  EXPECT_EQ(run.stats.h2d_bytes, 3 * kBlock);
  EXPECT_EQ(run.stats.call_h2d_bytes, 2 * kBlock);  // blocks 1 and 2
}

// Pre-evicts block 0 when kernel 3 begins.
class PreEvictAtKernel3 final : public Policy {
 public:
  void OnKernelBegin(uint32_t exec_id) override {
    if (exec_id == 3) context().PreEvict(BlockOfAddress(ProgramBuilder::BlockAddress(0)));
  }
};

TEST(SimUserModeTest, APreEvictionThatFindsItsBlockMovesItAsTheCallsOwn) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 1000, {0}, true);
  // Long enough for CUPTI's records to tell the engine block 0 is there.
  p.Kernel(9, 30'000'000, {1});
  p.Kernel(3, 1000, {1});
  p.Kernel(4, 30'000'000, {1});
  p.Kernel(5, 1000, {2}, true);  // room without the driver evicting
  const SimOptions options{.policy_from_user = true, .cupti = Unbuffered(16'000'000)};
  PreEvictAtKernel3 policy;
  const SimRun run = RunOnSim(p, 2, policy, TestDevice(), ReplayPolicy::kBatch, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.pre_evictions, 1u);
  EXPECT_EQ(run.stats.device_evictions, 0u);
  EXPECT_EQ(run.stats.d2h_bytes, kBlock);
  EXPECT_EQ(run.stats.call_d2h_bytes, kBlock);
  EXPECT_EQ(run.stats.call_h2d_bytes, 0u);  // every arrival was the fault path's
}

// Remembers when the engine heard of each fault batch.
class HearsFaults final : public Policy {
 public:
  void OnFaultBatch(const FaultBatch& /*batch*/) override { heard.push_back(context().now()); }
  std::vector<Nanos> heard;
};

TEST(SimUserModeTest, TheEngineHearsOfTheDriversWorkWhenCuptiIsFlushed) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 1000, {0}, true);
  p.Kernel(2, 10'000'000, {0});  // computes on past the first flushes
  // The driver serves the fault by itself, at once; its record waits for a
  // flush (they start at 0, 3, 6 ms: a 2 ms flush, then a 1 ms pause) and
  // reaches the engine when that flush ends. The fault comes at time 0 (the
  // test device has no launch gap), so the flush that starts then hands it
  // over at 2 ms.
  // (Records collected from the driver at once: collection is the next test's.)
  const SimOptions kCollectedAtOnce{.policy_from_user = true, .cupti = Unbuffered(0)};
  HearsFaults late;
  const SimRun run = RunOnSim(p, 1, late, TestDevice(), ReplayPolicy::kBatch, kCollectedAtOnce);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // Every page of the block per flush that saw the driver bring some in:
  // two batches of 256 entries each time, always as a flush ends.
  ASSERT_FALSE(late.heard.empty());
  EXPECT_EQ(late.heard[0], 2'000'000);
  EXPECT_EQ(late.heard.size() % 2, 0u);
  for (Nanos heard : late.heard) EXPECT_EQ(heard % 3'000'000, 2'000'000) << heard;

  // Records delivered at once: the engine hears when the driver starts.
  const SimOptions kImmediate{
      .policy_from_user = true,
      .cupti = {
          .collect_period_ns = 0, .flush_pause_ns = 0, .flush_cost_ns = 0, .buffer_records = 0}};
  HearsFaults prompt;
  const SimRun now = RunOnSim(p, 1, prompt, TestDevice(), ReplayPolicy::kBatch, kImmediate);
  ASSERT_TRUE(now.status.ok()) << now.status;
  ASSERT_FALSE(prompt.heard.empty());
  EXPECT_LT(prompt.heard[0], 100'000);
  EXPECT_EQ(now.stats.time_ns, run.stats.time_ns);  // the GPU's side is the same
}

// Remembers when the engine first heard of a fault on one block.
class HearsOfBlock final : public Policy {
 public:
  explicit HearsOfBlock(BlockNumber block) : block_(block) {}
  void OnFaultBatch(const FaultBatch& batch) override {
    for (const FaultedBlock& faulted : batch.blocks) {
      if (faulted.block == block_ && heard < 0) heard = context().now();
    }
  }
  Nanos heard = -1;

 private:
  BlockNumber block_;
};

TEST(SimUserModeTest, AFlushHandsOverOnlyWhatCuptiHasCollected) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 5'000'000, {0}, true);   // faults at 0, then computes 5 ms
  p.Kernel(2, 40'000'000, {1}, true);  // faults at about 5 ms, then computes on
  // CUPTI collects the driver's records every 16 ms; flushes start every
  // 3 ms and deliver 2 ms later. Block 1's fault waits for the collection
  // at 16 ms and the flush that starts at 18 ms: the engine hears of it at
  // 20 ms. With records collected at once, the flush starting at 6 ms hands
  // it over at 8 ms.
  const auto heard = [&](Nanos collect_period) {
    const SimOptions options{.policy_from_user = true, .cupti = Unbuffered(collect_period)};
    HearsOfBlock policy(BlockOfAddress(ProgramBuilder::BlockAddress(1)));
    const SimRun run = RunOnSim(p, 2, policy, TestDevice(), ReplayPolicy::kBatch, options);
    EXPECT_TRUE(run.status.ok()) << run.status;
    return policy.heard;
  };
  EXPECT_EQ(heard(16'000'000), 20'000'000);
  EXPECT_EQ(heard(0), 8'000'000);
}

TEST(SimUserModeTest, APopulateBesideTheBatchsFirstFaultIsNeverHeardOf) {
  // One kernel writes the first page of block 0, then of block 1: both
  // faults are in the driver's first batch, and both blocks are populated
  // (no data to copy). CUPTI makes no transfer record of a populate, and the
  // batch's one fault record names block 0.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Begin(1, 1000)
      .Access(ProgramBuilder::BlockAddress(0), kPageSize, true)
      .Access(ProgramBuilder::BlockAddress(1), kPageSize, true)
      .End(1);
  const auto heard = [&](SimOptions::PopulateRecords populates, bool faults_from_queue = false) {
    SimOptions options{.policy_from_user = true, .cupti = Unbuffered(0)};
    options.populate_records = populates;
    options.faults_from_queue = faults_from_queue;
    std::vector<Nanos> when;
    for (int block : {0, 1}) {
      HearsOfBlock policy(BlockOfAddress(ProgramBuilder::BlockAddress(block)));
      const SimRun run = RunOnSim(p, 2, policy, TestDevice(), ReplayPolicy::kBatch, options);
      EXPECT_TRUE(run.status.ok()) << run.status;
      when.push_back(policy.heard);
    }
    return when;
  };
  const std::vector<Nanos> first_fault = heard(SimOptions::PopulateRecords::kFirstFault);
  EXPECT_GE(first_fault[0], 0);
  EXPECT_EQ(first_fault[1], -1);  // never, not even at the final flush
  const std::vector<Nanos> all = heard(SimOptions::PopulateRecords::kAll);
  EXPECT_GE(all[0], 0);
  EXPECT_GE(all[1], 0);
  // The driver's own queue tells of every fault of the batch, within a
  // poll, before CUPTI's record would.
  const std::vector<Nanos> queued = heard(SimOptions::PopulateRecords::kFirstFault, true);
  EXPECT_GE(queued[0], 0);
  EXPECT_GE(queued[1], 0);
  EXPECT_LE(queued[0], first_fault[0]);
}

TEST(SimUserModeTest, EveryPolicyKeepsTheBooksStraightOnAModel) {
  absl::StatusOr<DeviceConfig> device = DevicePreset("h200");
  ASSERT_TRUE(device.ok());
  absl::StatusOr<cli::ProgramInput> program =
      cli::ProgramInput::FromWorkload("mlp", {"layers=3,hidden=2048,batch=2048,iterations=2"},
                                      device->compute);
  ASSERT_TRUE(program.ok()) << program.status();
  for (const auto* entry : Policies().Entries()) {
    const std::string& policy = entry->name;
    // A policy that maps pages remotely (memferry) cannot run where the
    // driver decides: the runner refuses it (tests/memferry_test.cc runs it).
    absl::StatusOr<std::unique_ptr<Policy>> made = Policies().Create(policy);
    ASSERT_TRUE(made.ok()) << made.status();
    if ((*made)->MapsRemotely()) continue;
    cli::RunRequest request;
    request.program = &*program;
    request.device = *device;
    request.capacity = "0.5";
    request.policy = policy;
    request.backend = "sim:policy_from=user";
    request.check_invariants = true;
    absl::StatusOr<cli::RunResult> result = cli::ExecuteRun(request);
    if (!result.ok() && result.status().code() == absl::StatusCode::kFailedPrecondition) {
      // A policy that cannot train at half (flashneuron keeps every weight
      // on the device) says so before it runs; it runs at the footprint.
      request.capacity = "1.0";
      result = cli::ExecuteRun(request);
    }
    ASSERT_TRUE(result.ok()) << policy << ": " << result.status();
    // memcpy maps every buffer as it is allocated, as device memory is:
    // nothing faults.
    if (policy != "memcpy") {
      EXPECT_GT(result->stats.faulted_blocks, 0u) << policy;
    }
  }
}

}  // namespace
}  // namespace umlab::testing
