// MemFerry's planners (policies/memferry) on hand-built layer tables whose
// right answers are worked out in the comments: the hybrid schedule's
// times, Algorithm 1 (the crossover, the hidden loads, backtracking and the
// readings memferry_planner.cc documents), the parameter budget, the DFGB
// greedy, and GO-MemFerry's gradient knapsack. Times are nanoseconds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "policies/memferry/hybrid_schedule.h"

namespace umlab::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr ExecutionMode kGfgb = ExecutionMode::kGfgb;
constexpr ExecutionMode kDha = ExecutionMode::kDha;
constexpr ExecutionMode kDfgb = ExecutionMode::kDfgb;

LayerCosts Layer(std::string name, uint64_t bytes, Nanos transfer, Nanos forward,
                 Nanos forward_from_host, Nanos backward = 0, Nanos backward_from_host = 0,
                 Nanos forward_after = 0, Nanos backward_after = 0) {
  LayerCosts c;
  c.name = std::move(name);
  c.parameter_bytes = bytes;
  c.transfer = transfer;
  c.forward = forward;
  c.forward_from_host = forward_from_host;
  c.backward = backward;
  c.backward_from_host = backward_from_host;
  c.forward_after = forward_after;
  c.backward_after = backward_after;
  return c;
}

// --- The hybrid schedule ---

// The paper's Fig. 6: three layers run DHA, DFGB and GFGB.
LayerTable FigureSix() {
  LayerTable t;
  t.layers = {Layer("l1", 10, 10, 2, 3, 3, 4), Layer("l2", 20, 6, 3, 5, 4, 10),
              Layer("l3", 30, 4, 5, 20, 6, 8)};
  return t;
}

TEST(HybridScheduleTest, FigureSixTimes) {
  const ScheduleTimes s = EvaluateSchedule(FigureSix(), {kDha, kDfgb, kGfgb}, true);
  // Forward: l3's load 0-4 beside l1 (DHA) 0-3 and l2 (DHA) 3-8; l3 8-13.
  EXPECT_EQ(s.forward_time, 13);
  EXPECT_EQ(s.link_idle_from, 4);
  EXPECT_EQ(s.layers[2].load_end, 4);
  EXPECT_EQ(s.layers[2].forward_start, 8);
  EXPECT_EQ(s.layers[2].forward_stall, 0);
  // l2's copy once the link is idle (4) and its forward is done (8): 8-14.
  EXPECT_EQ(s.layers[1].copy_start, 8);
  EXPECT_EQ(s.layers[1].copy_end, 14);
  // Backward: l3 13-19 (the first gradient), l2 on the GPU 19-23, l1 from
  // the host 23-27.
  EXPECT_EQ(s.first_gradient, 19);
  EXPECT_EQ(s.layers[1].backward_start, 19);
  EXPECT_EQ(s.layers[0].backward_end, 27);
  EXPECT_EQ(s.backward_time, 14);
  EXPECT_EQ(s.iteration_time, 27);
  EXPECT_EQ(s.late_copies, 0);
  EXPECT_EQ(s.parameter_bytes, 20u + 30u);  // DFGB and GFGB buffers
}

TEST(HybridScheduleTest, LoadStallsTheForwardAndCopyStallsTheBackward) {
  LayerTable t;
  t.forward_before_first = 1;
  t.layers = {Layer("a", 1, 10, 2, 9, 3, 5, /*forward_after=*/1, /*backward_after=*/2),
              Layer("b", 1, 6, 4, 9, 3, 5, 0, 0)};
  // Forward: a's load 0-10, so a waits from 1 to 10 and runs 10-12; A_{a,b}
  // 12-13; b's load 10-16, b waits 13-16 and runs 16-20.
  const ScheduleTimes all_gpu = EvaluateSchedule(t, {kGfgb, kGfgb}, true);
  EXPECT_EQ(all_gpu.layers[0].forward_stall, 9);
  EXPECT_EQ(all_gpu.layers[1].forward_stall, 3);
  EXPECT_EQ(all_gpu.forward_time, 20);
  // Backward: b 20-23, A 23-25, a 25-28.
  EXPECT_EQ(all_gpu.iteration_time, 28);

  // a as DFGB: its forward 1-10 from the host, b's load 0-6, b 11-15. The
  // copy starts at 10 and ends at 20, after b's backward (15-18) and A
  // (18-20): a starts at 20 without waiting, but the copy ran past the first
  // gradient (18).
  const ScheduleTimes dfgb = EvaluateSchedule(t, {kDfgb, kGfgb}, true);
  EXPECT_EQ(dfgb.forward_time, 15);
  EXPECT_EQ(dfgb.layers[0].copy_end, 20);
  EXPECT_EQ(dfgb.first_gradient, 18);
  EXPECT_EQ(dfgb.layers[0].backward_stall, 0);
  EXPECT_EQ(dfgb.late_copies, 1);
  // A full-duplex link has no such window.
  EXPECT_EQ(EvaluateSchedule(t, {kDfgb, kGfgb}, false).late_copies, 0);
  // Without A's backward, a's backward waits for the copy: 18 -> 20.
  t.layers[0].backward_after = 0;
  const ScheduleTimes waits = EvaluateSchedule(t, {kDfgb, kGfgb}, false);
  EXPECT_EQ(waits.layers[0].backward_stall, 2);
  EXPECT_EQ(waits.late_copies, 1);
  EXPECT_EQ(waits.iteration_time, 15 + 3 + 2 + 3);
}

TEST(HybridScheduleTest, NegativeTimesAreRefused) {
  LayerTable t;
  t.layers = {Layer("ok", 1, 1, 1, 1), Layer("bad", 1, 1, -1, 1)};
  const absl::Status status = ValidateLayerTable(t);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("bad"));
}

}  // namespace
}  // namespace umlab::testing
