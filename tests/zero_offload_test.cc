// `zero-offload` on hand-built programs whose step runs on the host: the
// gradient leaves the device while the backward goes on, and the
// parameter comes back while the CPU goes on, so neither waits. Times on
// the test device: 1 GB/s each way, no fixed costs, a block in 2.097 ms.
#include <gtest/gtest.h>

#include "core/tensor_role.h"
#include "policies/demand/demand.h"
#include "policies/zero_offload/zero_offload.h"
#include "tests/offload_program.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;

TEST(ZeroOffloadTest, TheGradientLeavesDuringTheBackwardAndTheParameterReturnsDuringTheStep) {
  ZeroOffloadPolicy policy;
  const SimRun run = RunOnSim(OffloadedStep(), 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // The gradient was written back after kernel 2, behind kernel 3.
  EXPECT_EQ(run.stats.pre_evictions, 1u);
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_writeback_bytes, 0u);
  EXPECT_EQ(run.stats.host_wait_ns, 0);
  // The parameter came back after the step, behind kernel 5: kernel 6
  // found it on the device.
  EXPECT_EQ(run.stats.prefetch_bytes, kBlockSize);
  EXPECT_EQ(run.stats.prefetch_useful_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_kernels, 2u);
  PolicyStats stats;
  policy.ReportStats(stats);
  EXPECT_EQ(stats.CountOf("planned_write_back_bytes"), kBlockSize);
  EXPECT_EQ(stats.CountOf("planned_reload_bytes"), kBlockSize);
}

TEST(ZeroOffloadTest, OnDemandTheStepWaitsForTheGradientAndTheForwardForTheParameter) {
  DemandPolicy policy;
  const SimRun run = RunOnSim(OffloadedStep(), 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_wait_ns, kBlockMove);
  EXPECT_EQ(run.stats.prefetch_bytes, 0u);
  // Kernel 1 and kernel 6 fault the parameter in, before and after the
  // step took it.
  EXPECT_EQ(run.stats.fault_migrated_bytes, 2 * kBlockSize);
}

TEST(ZeroOffloadTest, AProgramWithoutHostKernelsRunsAsDemand) {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Iteration(0);
  p.Kernel(1, 10 * kUs, {0, 1}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  ZeroOffloadPolicy zero;
  DemandPolicy demand;
  const SimRun a = RunOnSim(p, 1, zero);
  const SimRun b = RunOnSim(p, 1, demand);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(a.stats.time_ns, b.stats.time_ns);
  EXPECT_EQ(a.stats.h2d_bytes, b.stats.h2d_bytes);
  EXPECT_EQ(a.stats.d2h_bytes, b.stats.d2h_bytes);
  EXPECT_EQ(a.stats.pre_evictions, 0u);
}

// A gradient the CPU's step read, then freed, whose block the allocator
// hands to the next tensor, which kernel 3 writes.
ProgramBuilder FreedAfterTheStep() {
  ProgramBuilder p;
  const uint64_t block = ProgramBuilder::BlockAddress(0);
  p.Alloc(0, 1);
  p.Iteration(0);
  p.Activate(block, kBlockSize, RoleCause(TensorRole::kGradient));
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.OnHost(2).Kernel(2, 10 * kUs, {0});
  p.Deactivate(block, kBlockSize);
  p.Activate(block, kBlockSize, RoleCause(TensorRole::kActivation));
  p.Kernel(3, 10 * kUs, {0}, /*write=*/true);
  return p;
}

TEST(ZeroOffloadTest, UnifiedMemoryCopiesAFreedPageBackForTheNextTensor) {
  ZeroOffloadPolicy keep(/*recycle_freed_pages=*/false);
  const SimRun run = RunOnSim(FreedAfterTheStep(), 4, keep);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.fault_migrated_bytes, kBlockSize);
}

TEST(ZeroOffloadTest, RecyclingDropsTheFreedCopyAndPopulatesTheNextTensor) {
  // As on cudaMalloc memory: the freed gradient's host copy is dead, and
  // the next tensor's block is populated before kernel 3, with no fault
  // and no copy.
  ZeroOffloadPolicy recycle(/*recycle_freed_pages=*/true);
  const SimRun run = RunOnSim(FreedAfterTheStep(), 4, recycle);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.faults, 0u);  // both tensors' blocks populated ahead
  PolicyStats stats;
  recycle.ReportStats(stats);
  EXPECT_EQ(stats.CountOf("freed_bytes_discarded"), kBlockSize);
  EXPECT_EQ(stats.CountOf("freed_bytes_populated"), 2 * kBlockSize);
}

TEST(ZeroOffloadTest, AParameterReturnsOnlyAfterTheLastUpdateOfItsBlock) {
  // Two parameters share block 0 (half each); the CPU updates the second,
  // then the first. The second's copy back waits for the first's update:
  // issued earlier, it would hold the block the next update claims.
  ProgramBuilder p;
  const uint64_t base = ProgramBuilder::BlockAddress(0);
  const uint64_t half = kBlockSize / 2;
  p.Alloc(0, 2);
  p.Activate(base, half, RoleCause(TensorRole::kParameter));
  p.Activate(base + half, half, RoleCause(TensorRole::kParameter));
  // Initialised by the CPU: the device's copies are clean.
  p.OnHost(100).Kernel(100, 10 * kUs, {0}, /*write=*/true);
  p.Iteration(0);
  p.Kernel(1, 10 * kUs, {0});
  p.OnHost(2).Begin(2, 1000 * kUs).Access(base + half, half, true).End(2);
  p.OnHost(3).Begin(3, 1000 * kUs).Access(base, half, true).End(3);
  p.Kernel(4, 10 * kUs, {0});
  VectorSource source = p.Source();
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(source);
  ASSERT_TRUE(graph.ok());
  const HostStepSchedule schedule = ScheduleHostStep(graph->iterations.back());
  ASSERT_EQ(schedule.kernels(), 4u);
  EXPECT_TRUE(schedule.reload_after[1].empty());
  EXPECT_EQ(schedule.reload_after[2].size(), 2u);
  // Both halves come back after kernel 3, before kernel 4 reads them.
  ZeroOffloadPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_wait_ns, 0);
  EXPECT_EQ(run.stats.prefetch_bytes, kBlockSize);
}

}  // namespace
}  // namespace umlab::testing
