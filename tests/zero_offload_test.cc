// `zero-offload` on hand-built programs whose step runs on the host: the
// gradient leaves the device while the backward goes on, and the
// parameter comes back while the CPU goes on, so neither waits. Times on
// the test device: 1 GB/s each way, no fixed costs, a block in 2.097 ms.
#include <gtest/gtest.h>

#include "core/tensor_role.h"
#include "policies/demand/demand.h"
#include "policies/zero_offload/zero_offload.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kBlockMove = 2097152;  // 2 MiB at 1 GB/s

uint8_t Role(TensorRole role) { return static_cast<uint8_t>(role) + 1; }

// One iteration: kernel 1 (forward) reads the parameter (block 0) and
// kernel 2 (backward) writes its gradient (block 1); kernel 3 is 3 ms of
// other backward work; host kernel 4 (the CPU's step, 3 ms) reads the
// gradient and writes the parameter; kernel 5 is 3 ms of other work and
// kernel 6 (the next forward) reads the parameter.
ProgramBuilder OffloadedStep() {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Activate(ProgramBuilder::BlockAddress(0), kBlockSize, Role(TensorRole::kParameter));
  // The CPU initialises the parameter: the device's copies of it are
  // clean, and leave without a write-back when the step takes them.
  p.OnHost(100).Kernel(100, 10 * kUs, {0}, /*write=*/true);
  p.Iteration(0);
  p.Activate(ProgramBuilder::BlockAddress(1), kBlockSize, Role(TensorRole::kGradient));
  p.Kernel(1, 10 * kUs, {0});
  p.Begin(2, 10 * kUs)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, false)
      .Access(ProgramBuilder::BlockAddress(1), kBlockSize, true)
      .End(2);
  p.Kernel(3, 3000 * kUs, {});
  p.OnHost(4)
      .Begin(4, 3000 * kUs)
      .Access(ProgramBuilder::BlockAddress(1), kBlockSize, false)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, true)
      .End(4);
  p.Kernel(5, 3000 * kUs, {});
  p.Kernel(6, 10 * kUs, {0});
  p.Deactivate(ProgramBuilder::BlockAddress(1), kBlockSize);
  return p;
}

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

}  // namespace
}  // namespace umlab::testing
