// The sim's G10 fault models (`sim:faults=g10` and `g10-measured`): every
// missing page of a kernel faults at its start and moves at the link's
// pace, the kernel is charged G10's fault time, and an arrival never waits
// for the eviction that frees its frame. Times are worked out on the test
// device: 1 GB/s each way and no fixed costs, so a 2 MiB block moves in
// 2.097152 ms.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/backend_registry.h"
#include "policies/demand/demand.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kMs = 1000000;
constexpr Nanos kBlockMove = 2097152;  // 2 MiB at 1 GB/s

SimOptions G10(SimOptions::FaultModel model = SimOptions::FaultModel::kG10) {
  SimOptions options;
  options.fault_model = model;
  return options;
}

// What every kernel costs beside its compute and faults on this device.
Nanos KernelOverhead() {
  const DeviceConfig device = TestDevice();
  return device.kernel_launch_ns + device.kernel_grid_ns;
}

// One frame, two blocks: kernel 1 writes block 0, kernel 2 writes block 1
// (evicting block 0, dirty), kernel 3 reads block 0 back (evicting block 1).
// Each measured time is under a second, which the artifact reads as 0 ms.
// (So a kernel is charged its missing bytes at the link's pace.)
ProgramBuilder EvictAndReturn(Nanos last_compute_ns = kMs) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  for (uint32_t id = 1; id <= 3; ++id) p.FaultTimes(id, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0}, /*write=*/true);
  p.Kernel(2, kMs, {1}, /*write=*/true);
  p.Kernel(3, last_compute_ns, {0});
  return p;
}

TEST(SimG10FaultsTest, TheArtifactChargesMissingBytesAtTheLinksPace) {
  DemandPolicy demand;
  const SimRun run = RunOnSim(EvictAndReturn(), 1, demand, TestDevice(), ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  // Each kernel misses its whole block: charged 1 ms + 2 MiB at 1 GB/s.
  // Kernel 2's block needs no copy (fresh) and does not wait for block 0's
  // write-back; kernel 3's copy in (2.097 ms) runs beside block 1's write-
  // back and lands before the charged time is over.
  EXPECT_EQ(run.stats.time_ns, 3 * (kMs + kBlockMove + KernelOverhead()));
  EXPECT_EQ(run.stats.faults, 3u * kPagesPerBlock);
  EXPECT_EQ(run.stats.page_accesses, 3u * kPagesPerBlock);
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);       // block 0 comes back
  EXPECT_EQ(run.stats.d2h_bytes, 2 * kBlockSize);   // both were written
}

TEST(SimG10FaultsTest, NoBatchLatencyDelaysTheArrivals) {
  // Kernel 3 computes nothing, so its block's arrival, not its charge,
  // ends it: 2 MiB at 1 GB/s from its start, though the device's fault
  // path takes 45 us per batch, and its 512 faults make two batches.
  DemandPolicy demand;
  DeviceConfig device = TestDevice();
  device.fault_latency_ns = 45000;
  const SimRun run =
      RunOnSim(EvictAndReturn(/*last_compute_ns=*/0), 1, demand, device, ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, 2 * (kMs + kBlockMove) + kBlockMove + 3 * KernelOverhead());
}

TEST(SimG10FaultsTest, MeasuredTimesChargeTheKernelsOwnRate) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.FaultTimes(1, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0}, /*write=*/true);
  DemandPolicy demand;
  const SimRun run = RunOnSim(p, 1, demand, TestDevice(), ReplayPolicy::kBatch,
                              G10(SimOptions::FaultModel::kG10Measured));
  ASSERT_TRUE(run.status.ok()) << run.status;
  // Every output page missing: InputPF - ideal = 19 ms on top of 1 ms.
  EXPECT_EQ(run.stats.time_ns, 20 * kMs + KernelOverhead());
}

TEST(SimG10FaultsTest, AResidentKernelCostsItsComputeAlone) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.FaultTimes(1, 50 * kMs, 20 * kMs);
  p.FaultTimes(2, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0}, /*write=*/true);
  p.Kernel(2, 3 * kMs, {0});
  DemandPolicy demand;
  const SimRun run = RunOnSim(p, 1, demand, TestDevice(), ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, kMs + kBlockMove + 3 * kMs + 2 * KernelOverhead());
  EXPECT_EQ(run.stats.faults, kPagesPerBlock);  // kernel 2 finds its block resident
}

TEST(SimG10FaultsTest, BatchedFaultsWaitForTheEvictionThatFreesTheFrame) {
  // The same program on the default model takes longer: kernel 3's copy in
  // waits for block 1's write-back.
  DemandPolicy g10_demand, batched_demand;
  const SimRun g10 =
      RunOnSim(EvictAndReturn(), 1, g10_demand, TestDevice(), ReplayPolicy::kBatch, G10());
  const SimRun batched = RunOnSim(EvictAndReturn(), 1, batched_demand);
  ASSERT_TRUE(g10.status.ok()) << g10.status;
  ASSERT_TRUE(batched.status.ok()) << batched.status;
  EXPECT_GT(batched.stats.time_ns - 3 * KernelOverhead(), 3 * kMs + 2 * kBlockMove);
  EXPECT_EQ(g10.stats.h2d_bytes, batched.stats.h2d_bytes);
  EXPECT_EQ(g10.stats.d2h_bytes, batched.stats.d2h_bytes);
}

TEST(SimG10FaultsTest, AProgramWithoutMeasuredTimesIsRefused) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, kMs, {0});
  DemandPolicy demand;
  const SimRun run = RunOnSim(p, 1, demand, TestDevice(), ReplayPolicy::kBatch, G10());
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(run.status.message()),
              ::testing::HasSubstr("kernel 1 has none; only G10's graphs carry them"));
}

TEST(SimG10FaultsTest, AKernelLargerThanTheDeviceIsRefused) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.FaultTimes(1, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0, 1});
  DemandPolicy demand;
  const SimRun run = RunOnSim(p, 1, demand, TestDevice(), ReplayPolicy::kBatch, G10());
  EXPECT_FALSE(run.status.ok());
  EXPECT_THAT(std::string(run.status.message()),
              ::testing::HasSubstr("kernel 1 touches 2 blocks, more than the device's 1 frames"));
}

// Demand's decisions, plus moves of its own at chosen kernels' starts.
BlockNumber Block(int block) { return BlockOfAddress(ProgramBuilder::BlockAddress(block)); }

TEST(SimG10FaultsTest, AQueuedPrefetchIsWaitedForNotFaulted) {
  // Kernel 1 writes six blocks; at kernel 2 the policy pre-evicts them all,
  // and at kernel 3, which reads them, prefetches them back. The engine
  // lets four prefetches run at once and queues the other two: G10 marks a
  // page in transfer from the moment its prefetch is queued, so kernel 3
  // faults on none of them, is charged nothing for faults, and waits for
  // the six copies in: 6 x 2.097 ms from its start.
  ProgramBuilder p;
  p.Alloc(0, 6);
  for (uint32_t id = 1; id <= 3; ++id) p.FaultTimes(id, 50 * kMs, 20 * kMs);
  const std::vector<int> all = {0, 1, 2, 3, 4, 5};
  p.Kernel(1, kMs, all, /*write=*/true);
  p.Kernel(2, 20 * kMs, {});
  p.Kernel(3, kMs, all);
  ScriptedMoves policy;
  policy.At(2, [](PolicyContext& c) {
    for (int b = 0; b < 6; ++b) c.PreEvictPages(Block(b), FullPageMask(), MemoryTier::kHost);
  });
  policy.At(3, [](PolicyContext& c) {
    for (int b = 0; b < 6; ++b) c.Prefetch(Block(b), FullPageMask(), 3);
  });
  const SimRun run = RunOnSim(p, 8, policy, TestDevice(), ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faults, 6u * kPagesPerBlock);  // kernel 1's, none of kernel 3's
  EXPECT_EQ(run.stats.faulted_in_flight_pages, 0u);
  EXPECT_EQ(run.stats.h2d_bytes, 6 * kBlockSize);
  // Kernel 1: 1 ms + six fresh blocks charged at the link's pace; kernel 2
  // hides the write-backs; kernel 3: the six copies.
  EXPECT_EQ(run.stats.time_ns,
            (kMs + 6 * kBlockMove) + 20 * kMs + 6 * kBlockMove + 3 * KernelOverhead());
}

TEST(SimG10FaultsTest, AnArrivalWaitsForItsOwnPagesWriteBackNotItsNeighbours) {
  // G10 moves pages, not blocks. At kernel 2 the policy writes back the
  // first half of block 0, then blocks 1 to 3, on the device-to-host lane;
  // at kernel 3 (2 ms on), block 0's second half, queued behind them until
  // 8.4 ms. Kernel 3 reads the first half back: its copy waits for that
  // half's write-back (done at 1.05 ms), not for its neighbour's.
  ProgramBuilder p;
  p.Alloc(0, 4);
  for (uint32_t id = 1; id <= 3; ++id) p.FaultTimes(id, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0, 1, 2, 3}, /*write=*/true);
  p.Kernel(2, 2 * kMs, {});
  p.Begin(3, 0).Access(ProgramBuilder::BlockAddress(0), kBlockSize / 2, false).End(3);
  const PageMask first_half = PageRangeMask(0, kPagesPerBlock / 2);
  ScriptedMoves policy;
  policy.At(2, [&](PolicyContext& c) {
    c.PreEvictPages(Block(0), first_half, MemoryTier::kHost);
    for (int b = 1; b <= 3; ++b) c.PreEvictPages(Block(b), FullPageMask(), MemoryTier::kHost);
  });
  policy.At(3, [&](PolicyContext& c) {
    c.PreEvictPages(Block(0), ~first_half, MemoryTier::kHost);
  });
  const SimRun run = RunOnSim(p, 4, policy, TestDevice(), ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize / 2);
  EXPECT_EQ(run.stats.d2h_bytes, 4 * kBlockSize);
  EXPECT_EQ(run.stats.time_ns,
            (kMs + 4 * kBlockMove) + 2 * kMs + kBlockMove / 2 + 3 * KernelOverhead());
}

TEST(SimG10FaultsTest, AQueuedPrefetchTheEngineDropsFaultsInstead) {
  // Five frames. Kernel 1 fills them with blocks 0 to 4; at kernel 2 the
  // policy pre-evicts those, and kernel 2 writes block 5. Kernel 3 reads
  // block 4, whose prefetch waits behind four others that fill the device,
  // and, its turn come, finds no frame the policy will give a prefetch: it
  // is dropped, and the pages kernel 3 waited for fault in.
  ProgramBuilder p;
  p.Alloc(0, 6);
  for (uint32_t id = 1; id <= 3; ++id) p.FaultTimes(id, 50 * kMs, 20 * kMs);
  p.Kernel(1, kMs, {0, 1, 2, 3, 4}, /*write=*/true);
  p.Kernel(2, 20 * kMs, {5}, /*write=*/true);
  p.Kernel(3, kMs, {4});
  ScriptedMoves policy;
  policy.refuse_prefetch_victims = true;
  policy.At(2, [](PolicyContext& c) {
    for (int b = 0; b < 5; ++b) c.PreEvictPages(Block(b), FullPageMask(), MemoryTier::kHost);
  });
  policy.At(3, [](PolicyContext& c) {
    for (int b = 0; b < 5; ++b) c.Prefetch(Block(b), FullPageMask(), 3);
  });
  const SimRun run = RunOnSim(p, 5, policy, TestDevice(), ReplayPolicy::kBatch, G10());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.prefetches_dropped, 1u);
  EXPECT_EQ(run.stats.faults, 7u * kPagesPerBlock);  // six fresh blocks, then block 4
}

TEST(SimG10FaultsTest, UserModeIsRefused) {
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      Backends().Create("sim:faults=g10,policy_from=user", TestDevice(), 4);
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(std::string(backend.status().message()),
              ::testing::HasSubstr("use policy_from=driver with it"));
}

}  // namespace
}  // namespace umlab::testing
