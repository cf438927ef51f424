// light-params-remote (policies/light_params_remote): parameters that no
// kernel rereads are read in host memory; the rest migrate on demand.
#include <gtest/gtest.h>

#include "core/tensor_role.h"
#include "policies/light_params_remote/light_params_remote.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

Event Read(int block, uint32_t rereads) {
  Event read;
  read.kind = EventKind::kAccess;
  read.address = ProgramBuilder::BlockAddress(block);
  read.size = kBlockSize;
  read.rereads = rereads;
  return read;
}

TEST(LightParamsRemoteTest, OnlyParametersReadInOnePassStayInHostMemory) {
  // Block 0: a parameter read in one pass (a layer norm's). Block 1: a
  // parameter a GEMM passes over four times. Block 2: an activation. Two
  // iterations of one kernel that reads 0 and 1 and writes 2.
  ProgramBuilder p;
  p.Alloc(0, 3);
  const uint8_t parameter = ActivateCause(TensorRole::kParameter);
  p.Activate(ProgramBuilder::BlockAddress(0), kBlockSize, parameter);
  p.Activate(ProgramBuilder::BlockAddress(1), kBlockSize, parameter);
  p.Activate(ProgramBuilder::BlockAddress(2), kBlockSize, ActivateCause(TensorRole::kActivation));
  for (uint64_t iteration = 0; iteration < 2; ++iteration) {
    p.Iteration(iteration);
    p.Begin(1, 10000).Raw(Read(0, 0)).Raw(Read(1, 3));
    p.Access(ProgramBuilder::BlockAddress(2), kBlockSize, /*write=*/true).End(1);
  }
  LightParamsRemotePolicy policy;
  const SimRun run = RunOnSim(p, 3, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_mapped_bytes, kBlockSize);   // block 0, once
  EXPECT_EQ(run.stats.remote_read_bytes, 2 * kBlockSize);  // block 0, each iteration
  EXPECT_EQ(run.stats.remote_write_bytes, 0u);
  EXPECT_EQ(run.stats.peak_device_bytes, 2 * kBlockSize);  // blocks 1 and 2
  const auto& by_role = run.stats.peak_device_bytes_by_role;
  EXPECT_EQ(by_role[static_cast<int>(TensorRole::kParameter)], kBlockSize);
  EXPECT_EQ(by_role[static_cast<int>(TensorRole::kActivation)], kBlockSize);
}

TEST(LightParamsRemoteTest, WithoutRolesItMigratesEverything) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Iteration(0);
  p.Kernel(1, 10000, {0});
  LightParamsRemotePolicy policy;
  const SimRun run = RunOnSim(p, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_mapped_bytes, 0u);
  EXPECT_EQ(run.stats.peak_device_bytes, kBlockSize);
}

}  // namespace
}  // namespace umlab::testing
