// How a kernel's issuers walk its pages on the sim (SimOptions::
// spread_access, `sim:access=`): in order, all taking the next page as
// umlab's replay kernel does, or spread, each its own slice, as a real
// kernel's thread blocks partition their tensors.

#include <gtest/gtest.h>

#include "policies/demand/demand.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

// Four blocks touched by one kernel on four SMs, under a policy that brings
// a whole block in on its first fault.
SimRun FourBlocks(bool spread) {
  return FourBlocksWholeOnFirstFault(TestDevice(4), SimOptions{.spread_access = spread});
}

// Ordered, all four SMs fault on block 0's first pages; once it is in, on
// block 1's; and so on: a batch per block. Spread, each SM starts in a block
// of its own: one batch names all four.
TEST(SimAccessOrderTest, SpreadIssuersFaultEveryBlockInOneBatch) {
  struct Expected {
    bool spread;
    uint64_t batches, faults;
  };
  for (const Expected& e : {Expected{false, 4, 16}, Expected{true, 1, 4}}) {
    const SimRun run = FourBlocks(e.spread);
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.stats.fault_batches, e.batches) << "spread " << e.spread;
    EXPECT_EQ(run.stats.faults, e.faults) << "spread " << e.spread;
    EXPECT_EQ(run.stats.faulted_blocks, 4u) << "spread " << e.spread;
  }
}

TEST(SimAccessOrderTest, BothOrdersTouchTheSamePages) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  // Uneven shares: 3 blocks of pages over 4 SMs, a write and reads.
  p.Kernel(1, 5000, {0, 1, 2}, /*write=*/true);
  p.Kernel(2, 5000, {2, 0});
  for (bool spread : {false, true}) {
    DemandPolicy demand;
    const SimRun run = RunOnSim(p, 2, demand, TestDevice(4), ReplayPolicy::kBatch,
                                SimOptions{.spread_access = spread});
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.stats.page_accesses, 5u * kPagesPerBlock) << "spread " << spread;
    EXPECT_EQ(run.stats.kernels, 2u);
  }
}

}  // namespace
}  // namespace umlab::testing
