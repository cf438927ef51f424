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

}  // namespace
}  // namespace umlab::testing
