// Host kernels on the sim (KernelPlace::kHost): CPU work in the program's
// order whose accesses take pages off the device, as a CPU access does
// under UVM. Times are worked out on the test device: 1 GB/s each way, no
// fixed costs, so a block crosses the link in 2.097152 ms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/kernel_assembler.h"
#include "policies/demand/demand.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kBlockMove = 2097152;  // 2 MiB at 1 GB/s

BlockNumber Block(int block) { return BlockOfAddress(ProgramBuilder::BlockAddress(block)); }

TEST(SimHostKernelTest, AHostReadOfADirtyBlockWritesItBackFirst) {
  // Kernel 1 writes block 0 on the device (populated, no copy). Host
  // kernel 2 reads it: the block is written back and the CPU waits for the
  // copy, then computes 100 us. Kernel 3 reads it on the device again: it
  // faults and is copied back in.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.OnHost(2).Kernel(2, 100 * kUs, {0});
  p.Kernel(3, 10 * kUs, {0});
  DemandPolicy policy;
  const DeviceConfig device = TestDevice();
  const SimRun run = RunOnSim(p, 4, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_kernels, 1u);
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_wait_ns, kBlockMove);
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);  // kernel 3's fault
  EXPECT_EQ(run.stats.kernels, 3u);
  EXPECT_EQ(run.stats.ideal_time_ns, 120 * kUs);
}

TEST(SimHostKernelTest, TheHostKernelTakesItsTimeWithNoLaunchAndNoDeviceWork) {
  // A host kernel alone: its pages were never on the device, so nothing
  // moves and the run lasts its compute, with no launch gap or grid.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 100 * kUs, {0}, /*write=*/true);
  DemandPolicy policy;
  DeviceConfig device = TestDevice();
  device.kernel_launch_ns = 7 * kUs;
  device.kernel_grid_ns = 3 * kUs;
  const SimRun run = RunOnSim(p, 4, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, 100 * kUs);
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.stats.launch_ns, 0);
  EXPECT_EQ(run.stats.page_accesses, 0u);
}

TEST(SimHostKernelTest, WhatTheHostWritesIsCopiedInNotZeroFilled) {
  // Host kernel 1 writes block 0, which held no data: the data is the
  // CPU's now, so kernel 2's fault copies the block in rather than
  // populating zeroes.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 100 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy, TestDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);
  EXPECT_EQ(run.stats.host_writeback_bytes, 0u);
}

TEST(SimHostKernelTest, AHostReadOfACleanBlockDropsItWithoutACopy) {
  // Host kernel 1 writes block 0; kernel 2 reads it on the device (a clean
  // copy of the host's data); host kernel 3 reads it again: the device's
  // copy goes without a write-back and the CPU does not wait; kernel 4
  // faults it in a second time.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 100 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  p.OnHost(3).Kernel(3, 100 * kUs, {0});
  p.Kernel(4, 10 * kUs, {0});
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy, TestDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.d2h_bytes, 0u);
  EXPECT_EQ(run.stats.host_wait_ns, 0);
  EXPECT_EQ(run.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.faulted_blocks, 2u);
}

TEST(SimHostKernelTest, AMigrationOnItsWayLandsBeforeTheHostTakesThePages) {
  // Host kernel 1 writes block 0. Kernel 2 (10 us) prefetches it, and
  // host kernel 3 begins while the copy (2.1 ms) is on its way: it waits
  // for the copy to land, then drops the clean block without a write-back.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 100 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {});
  p.OnHost(3).Kernel(3, 100 * kUs, {0});
  ScriptedMoves policy;
  policy.At(2, [](PolicyContext& c) { c.Prefetch(Block(0), FullPageMask(), 0); });
  const DeviceConfig device = TestDevice();
  const SimRun run = RunOnSim(p, 4, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, 0u);
  // The prefetch started with kernel 2, after its launch gap.
  EXPECT_EQ(run.stats.host_wait_ns, kBlockMove - 10 * kUs - device.kernel_grid_ns);
}

TEST(SimHostKernelTest, APrefetchOfPagesTheHostHoldsIsNotIssued) {
  // Host kernel 1 writes block 0 while the policy asks for it at the
  // kernel's begin: the CPU holds the pages, so nothing moves; kernel 2
  // faults the block in.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 3000 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.Prefetch(Block(0), FullPageMask(), 2); });
  const SimRun run = RunOnSim(p, 4, policy, TestDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.prefetch_bytes, 0u);
  // Not even populated and written back: the pages were held before the
  // policy heard of the begin.
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);
  EXPECT_EQ(run.stats.d2h_bytes, 0u);
  EXPECT_EQ(run.stats.faulted_blocks, 1u);
  EXPECT_EQ(run.stats.fault_migrated_bytes, kBlockSize);
}

TEST(SimHostKernelTest, OnlyTheBatchedFaultModelWithThePolicyInTheDriverRunsThem) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.OnHost(1).Kernel(1, 100 * kUs, {0});
  DemandPolicy policy;
  SimOptions options;
  options.policy_from_user = true;
  const SimRun run = RunOnSim(p, 4, policy, TestDevice(), ReplayPolicy::kBatch, options);
  EXPECT_THAT(run.status.message(), ::testing::HasSubstr("runs on the host"));
}

TEST(SimHostKernelTest, AKernelDefinedToRunSomewhereUnknownIsMalformed) {
  ProgramBuilder p;
  Event define;
  define.kind = EventKind::kKernelDefine;
  define.exec_id = 1;
  define.name = "k";
  define.cause = 2;
  p.Raw(define).Kernel(1, kUs, {});
  VectorSource source = p.Source();
  KernelAssembler assembler(source);
  while (assembler.Next()) {
  }
  EXPECT_THAT(assembler.status().message(), ::testing::HasSubstr("neither the device"));
}

}  // namespace
}  // namespace umlab::testing
