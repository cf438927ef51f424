// The cuda backend's replay plan: the whole program laid out before the
// timed run. Host code only, so it runs wherever the cuda backend is built
// (CI included), with or without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#if __has_include("backends/cuda/replay_plan.h")
#include "backends/cuda/replay_plan.h"
#include "tests/program_builder.h"

namespace umlab::cuda {
namespace {

using testing::ProgramBuilder;

TEST(ReplayPlan, HoldsEventsBetweenKernelsForTheKernelAfterThem) {
  ProgramBuilder program;
  program.Alloc(0, 4).Iteration(0).Kernel(1, 1000, {0, 1}).Kernel(2, 2000, {2})
      .Iteration(1).Free(0, 4);
  auto source = program.Source();
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(source, /*keep_kernel_events=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->kernels.size(), 2u);
  ASSERT_EQ(plan->between.size(), 4u);  // alloc, iteration 0, iteration 1, free
  EXPECT_EQ(plan->kernels[0].first_event, 0u);
  EXPECT_EQ(plan->kernels[0].event_count, 2u);
  EXPECT_EQ(plan->kernels[1].event_count, 0u);
  EXPECT_EQ(plan->trailing_events, 2u);
  EXPECT_EQ(plan->kernels[0].begin.duration_ns, 1000);
  EXPECT_EQ(plan->kernels[1].end.exec_id, 2u);
  EXPECT_TRUE(plan->kernels[0].events.empty());
}

TEST(ReplayPlan, MergesAdjacentAccessesOfOneKindAndCountsPages) {
  ProgramBuilder program;
  program.Alloc(0, 4)
      .Begin(7, 100)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, false)
      .Access(ProgramBuilder::BlockAddress(1), kBlockSize, false)  // continues the run
      .Access(ProgramBuilder::BlockAddress(2), kPageSize, true)    // a write: a new run
      .Access(ProgramBuilder::BlockAddress(0), 1, false)           // back to block 0
      .End(7);
  auto source = program.Source();
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(source, /*keep_kernel_events=*/true);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->kernels.size(), 1u);
  const PlannedKernel& kernel = plan->kernels[0];
  EXPECT_EQ(kernel.accesses, 2u * kPagesPerBlock + 2);
  ASSERT_EQ(kernel.range_count, 3u);
  EXPECT_EQ(plan->ranges[0].pages, 2u * kPagesPerBlock);
  EXPECT_FALSE(plan->ranges[0].write);
  EXPECT_TRUE(plan->ranges[1].write);
  EXPECT_EQ(plan->ranges[2].first_page, PageOfAddress(ProgramBuilder::BlockAddress(0)));
  EXPECT_EQ(kernel.events.size(), 6u);  // begin, four accesses, end
  EXPECT_EQ(plan->total_accesses(), kernel.accesses);
}

TEST(ReplayPlan, MergesEveryReservedRangeOnce) {
  // Block 1 is reserved twice (freed and reserved again), blocks 5-6 touch
  // each other: two ranges of managed memory cover it all.
  ProgramBuilder program;
  program.Alloc(0, 2).Free(1, 1).Alloc(1, 1).Alloc(5, 1).Alloc(6, 1)
      .Kernel(1, 10, {0, 1, 5, 6});
  auto source = program.Source();
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(source, false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->segments.size(), 2u);
  EXPECT_EQ(plan->segments[0].address, ProgramBuilder::BlockAddress(0));
  EXPECT_EQ(plan->segments[0].size, 2 * kBlockSize);
  EXPECT_EQ(plan->segments[1].address, ProgramBuilder::BlockAddress(5));
  EXPECT_EQ(plan->segments[1].size, 2 * kBlockSize);
  EXPECT_EQ(plan->segment_bytes, 4 * kBlockSize);
}

TEST(ReplayPlan, PlansHostKernelsInOrderWithTheirAccesses) {
  // Host kernel 2 stays in its place among the GPU's kernels, with the
  // ranges the CPU will touch.
  ProgramBuilder program;
  program.Alloc(0, 2).Kernel(1, 10, {0}, /*write=*/true);
  program.OnHost(2).Kernel(2, 20, {0, 1}, /*write=*/true);
  program.Kernel(3, 10, {1});
  auto source = program.Source();
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(source, false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->kernels.size(), 3u);
  EXPECT_EQ(plan->host_kernels, 1u);
  EXPECT_FALSE(plan->kernels[0].on_host);
  EXPECT_TRUE(plan->kernels[1].on_host);
  EXPECT_FALSE(plan->kernels[2].on_host);
  const PlannedKernel& host = plan->kernels[1];
  EXPECT_EQ(host.accesses, 2u * kPagesPerBlock);
  ASSERT_EQ(host.range_count, 1u);
  EXPECT_TRUE(plan->ranges[host.first_range].write);
  // The define comes before the host kernel, among the events between.
  EXPECT_EQ(host.event_count, 1u);
  EXPECT_EQ(plan->between[host.first_event].kind, EventKind::kKernelDefine);
}

TEST(ReplayPlan, RefusesAnAccessOutsideEveryReservedRange) {
  ProgramBuilder program;
  program.Alloc(0, 1).Kernel(3, 10, {0, 2});
  auto source = program.Source();
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(source, false);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()),
              ::testing::HasSubstr("kernel 3 touches 0x100400000, outside every reserved segment"));
}

}  // namespace
}  // namespace umlab::cuda

#else
TEST(ReplayPlan, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
}
#endif
