// MemFerry's planners (policies/memferry) on hand-built layer tables whose
// right answers are worked out in the comments: the hybrid schedule's
// times, Algorithm 1 (the crossover, the hidden loads, backtracking and the
// readings memferry_planner.cc documents), the parameter budget, the DFGB
// greedy, and GO-MemFerry's gradient knapsack. Times are nanoseconds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "policies/memferry/gradient_offload_planner.h"
#include "policies/memferry/hybrid_schedule.h"
#include "policies/memferry/memferry_planner.h"

namespace umlab::testing {
namespace {

using ::testing::Each;
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

std::vector<DecisionKind> Kinds(const std::vector<PlanDecision>& decisions) {
  std::vector<DecisionKind> kinds;
  for (const PlanDecision& d : decisions) kinds.push_back(d.kind);
  return kinds;
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

TEST(HybridScheduleTest, RemoteReadsHoldTheLaneAndCopiesWaitForThem) {
  // a runs from the host 0-10 and its reads hold the lane 0-6 (umlab's
  // link: they go first); b's 8 of load then runs 6-14, not 0-8, and b
  // waits for it: 14-16 where the paper's link gives 10-12.
  LayerTable t;
  t.layers = {Layer("a", 1, 20, 10, 10), Layer("b", 1, 8, 2, 50)};
  EXPECT_EQ(EvaluateSchedule(t, {kDha, kGfgb}, false).forward_time, 12);
  t.layers[0].forward_link = 6;
  const ScheduleTimes shared = EvaluateSchedule(t, {kDha, kGfgb}, false);
  EXPECT_EQ(shared.layers[1].load_end, 14);
  EXPECT_EQ(shared.layers[1].forward_stall, 4);
  EXPECT_EQ(shared.forward_time, 16);

  // x's copy (5) starts when its forward ends (2), but y's reads hold the
  // lane 2-10: it lands at 15, after x's backward would have begun (13).
  LayerTable u;
  u.layers = {Layer("x", 1, 5, 1, 2, 1, 4), Layer("y", 1, 50, 1, 10, 1, 1)};
  EXPECT_EQ(EvaluateSchedule(u, {kDfgb, kDha}, false).late_copies, 0);
  u.layers[1].forward_link = 8;
  const ScheduleTimes late = EvaluateSchedule(u, {kDfgb, kDha}, false);
  EXPECT_EQ(late.layers[0].copy_end, 15);
  EXPECT_EQ(late.layers[0].backward_stall, 2);
  EXPECT_EQ(late.late_copies, 1);
  // y's backward reads hold the lane too, from its start (12) for 3: a copy
  // of 12 still going then (2-14 without them) lands at 17.
  u.layers[1].forward_link = 0;
  u.layers[0].transfer = 12;
  u.layers[1].backward_link = 3;
  const ScheduleTimes pushed = EvaluateSchedule(u, {kDfgb, kDha}, false);
  EXPECT_EQ(pushed.layers[0].copy_end, 17);
  EXPECT_EQ(pushed.layers[0].backward_stall, 17 - 13);
}

TEST(HybridScheduleTest, NegativeTimesAreRefused) {
  LayerTable t;
  t.layers = {Layer("ok", 1, 1, 1, 1), Layer("bad", 1, 1, -1, 1)};
  const absl::Status status = ValidateLayerTable(t);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("bad"));
  EXPECT_FALSE(PlanMemferry(t, {}).ok());
}

// --- Algorithm 1 ---

// A single layer is DHA exactly while T^H_FP <= T_FP + T_trans (line 3).
TEST(ForwardAlgorithmTest, LineThreeThreshold) {
  for (Nanos host = 10; host <= 40; ++host) {
    LayerTable t;
    t.layers = {Layer("linear", 1, 20, 10, host)};
    const ForwardPlan plan = RunForwardAlgorithm(t);
    EXPECT_EQ(plan.modes[0], host <= 30 ? kDha : kGfgb) << "T^H_FP " << host;
    // Either way the forward takes the shorter of the two.
    EXPECT_EQ(plan.all, std::min<Nanos>(host, 30)) << "T^H_FP " << host;
  }
}

// The crossover of the paper's Fig. 3(b): an embedding (a large table,
// little compute) and a layer norm (a small load that costs more than its
// compute) run from the host; linear layers, whose host forward is many
// times their HBM forward, run on the GPU.
TEST(ForwardAlgorithmTest, MemoryLightLayersGoDhaComputeHeavyLayersGoGpu) {
  LayerTable t;
  t.layers = {Layer("embedding", 1000, 100, 2, 3), Layer("linear1", 100, 8, 10, 40),
              Layer("layer_norm", 1, 1, 1, 2), Layer("linear2", 100, 8, 10, 40)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  EXPECT_THAT(plan.modes, ElementsAre(kDha, kGfgb, kDha, kGfgb));
  // embedding: T_all 3, T_res 3. linear1: 8 >= 3, and no GFGB layer to
  // change (tag -1), so it waits: base 3 + 8 + 10 - 3 = 18, T_res 10.
  // layer_norm: 20, 12. linear2: 8 < 12, hidden: 30, 14.
  EXPECT_EQ(plan.all, 30);
  EXPECT_EQ(plan.reserve, 14);
  EXPECT_EQ(plan.tag, 3);
  EXPECT_THAT(Kinds(plan.decisions),
              ElementsAre(DecisionKind::kDhaByCriterion, DecisionKind::kGfgbAfterBacktrack,
                          DecisionKind::kDhaByCriterion, DecisionKind::kGfgbLoadHidden));
  EXPECT_EQ(plan.decisions[1].delta, 5);  // linear1's load left exposed: 8 - 3
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, plan.all);
}

// Reading (a)'s other side: charging only the exposed load sends the layer
// norm, whose one-unit load hides in the reserve, to the GPU.
TEST(ForwardAlgorithmTest, ExposedLoadCriterionKeepsHiddenLoadsOnTheGpu) {
  LayerTable t;
  t.layers = {Layer("embedding", 1000, 100, 2, 3), Layer("linear1", 100, 8, 10, 40),
              Layer("layer_norm", 1, 1, 1, 2), Layer("linear2", 100, 8, 10, 40)};
  const ForwardPlan plan = RunForwardAlgorithm(t, DhaCriterion::kExposedLoad);
  EXPECT_THAT(plan.modes, ElementsAre(kDha, kGfgb, kGfgb, kGfgb));
  // As above to linear1 (18, 10); layer_norm: 1 < 10, hidden: 19, 10;
  // linear2: 8 < 10: 29, 12. One unit faster than the literal reading.
  EXPECT_EQ(plan.all, 29);
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 29);
}

// Lines 18-29: a hidden GFGB layer turns DHA when that hides enough of a
// later load to pay for its slower forward.
TEST(ForwardAlgorithmTest, ReadsThatHoldTheLinkLeaveItLessReserve) {
  // a goes DHA (6 <= 5 + 10) and adds its 6 to T_res, so b's load of 3
  // hides in it. Where a's reads hold the link for 4 of those 6 (reading
  // (i)), only 2 are free: b's load waits 1, as the schedule says.
  LayerTable t;
  t.layers = {Layer("a", 1, 10, 5, 6), Layer("b", 1, 3, 10, 100)};
  const ForwardPlan paper = RunForwardAlgorithm(t);
  EXPECT_THAT(Kinds(paper.decisions),
              ElementsAre(DecisionKind::kDhaByCriterion, DecisionKind::kGfgbLoadHidden));
  t.layers[0].forward_link = 4;
  const ForwardPlan shared = RunForwardAlgorithm(t);
  EXPECT_THAT(shared.modes, ElementsAre(kDha, kGfgb));
  EXPECT_THAT(Kinds(shared.decisions),
              ElementsAre(DecisionKind::kDhaByCriterion, DecisionKind::kGfgbAfterBacktrack));
  EXPECT_EQ(shared.decisions.back().delta, 1);
  EXPECT_EQ(shared.all, 17);
  EXPECT_EQ(EvaluateSchedule(t, shared.modes, false).forward_time, 17);
}

TEST(ForwardAlgorithmTest, BacktrackingTurnsAnEarlierLayerToDha) {
  LayerTable t;
  t.layers = {Layer("l0", 1, 20, 10, 10), Layer("l1", 1, 5, 4, 10), Layer("l2", 1, 30, 5, 60)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  // l0: DHA (10 <= 30): 10, 10. l1: 10 > 9, so GFGB; 5 < 10, hidden: tag 1,
  // 14, 9. l2: GFGB, 30 >= 9: base 14 + 30 + 5 - 9 = 40. Turning l1 to DHA
  // (slower by 6, gain 5 + 6 = 11): max(30 - 9 - 11, 0) + 14 + 6 + 5 = 35 <
  // 40, so it turns; T_res 20 is still short of 30, so l2 waits 10.
  EXPECT_THAT(plan.modes, ElementsAre(kDha, kDha, kGfgb));
  EXPECT_EQ(plan.all, 35);
  EXPECT_EQ(plan.reserve, 5);  // max(20 - 30, 0) + 5
  EXPECT_EQ(plan.tag, 2);
  EXPECT_THAT(Kinds(plan.decisions),
              ElementsAre(DecisionKind::kDhaByCriterion, DecisionKind::kGfgbLoadHidden,
                          DecisionKind::kBacktrackToDha, DecisionKind::kGfgbAfterBacktrack));
  const PlanDecision& turn = plan.decisions[2];
  EXPECT_EQ(turn.layer, 1);
  EXPECT_EQ(turn.for_layer, 2);
  EXPECT_EQ(turn.delta, 5);
  EXPECT_EQ(plan.decisions[3].delta, 10);
  // The schedule agrees: l2's load 0-30, l0 and l1 0-20, l2 30-35. Left
  // GFGB, l1 would have made l2 wait until 35 and end at 40.
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 35);
  EXPECT_EQ(EvaluateSchedule(t, {kDha, kGfgb, kGfgb}, true).forward_time, 40);
}

TEST(ForwardAlgorithmTest, BacktrackingKeepsALayerWhoseChangeCostsMore) {
  LayerTable t;
  t.layers = {Layer("l0", 1, 20, 10, 10), Layer("l1", 1, 5, 4, 30), Layer("l2", 1, 30, 5, 60)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  // As above, but l1 is slower by 26 from the host (gain 31):
  // max(30 - 9 - 31, 0) + 14 + 26 + 5 = 45 >= 40, so l1 stays and l2 waits.
  EXPECT_THAT(plan.modes, ElementsAre(kDha, kGfgb, kGfgb));
  EXPECT_EQ(plan.all, 40);
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 40);
}

// Reading (e): after one change, the next candidate's T^i_all includes the
// first change's slower forward.
TEST(ForwardAlgorithmTest, BacktrackingCountsEveryChangeSoFar) {
  LayerTable t;
  t.layers = {Layer("l0", 1, 100, 10, 10), Layer("l1", 1, 2, 3, 6), Layer("l2", 1, 2, 3, 6),
              Layer("l3", 1, 40, 5, 100)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  // l0 DHA: 10, 10. l1, l2 hidden: 13, 11 and 16, 12; tag 1. l3: base
  // 16 + 40 + 5 - 12 = 49. l1 (slower 3, gain 5): 23 + 16 + 3 + 5 = 47 < 49,
  // turns; T^b_all 19, T^b_res 17. l2: 18 + 19 + 3 + 5 = 45 < 47, turns.
  // (Without counting l1's change, l2's would be 42.)
  EXPECT_THAT(plan.modes, ElementsAre(kDha, kDha, kDha, kGfgb));
  EXPECT_EQ(plan.all, 45);
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 45);
}

// The computation before the first layer and between layers is time the
// link loads in (line 15 and reading (h)).
TEST(ForwardAlgorithmTest, ParameterFreeComputeHidesLoads) {
  LayerTable t;
  t.forward_before_first = 20;
  t.layers = {Layer("l0", 1, 15, 5, 30, 0, 0, /*forward_after=*/12), Layer("l1", 1, 10, 5, 30)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  // T_res 20 hides l0's 15: 25, 10, then A: 37, 22; l1's 10 < 22: 42, 17.
  EXPECT_THAT(plan.modes, ElementsAre(kGfgb, kGfgb));
  EXPECT_EQ(plan.all, 42);
  EXPECT_EQ(plan.reserve, 17);
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 42);
}

// Algorithm 1's account of a change covers only the stall of the layer it
// backtracks for. Here turning l1 to DHA for l3 also shortens l2's earlier
// stall, which T_all keeps: it expects 58 where the schedule takes 55. That
// is why a plan's predicted times are the schedule's.
TEST(ForwardAlgorithmTest, AccountOverstatesWhenAChangeAlsoShortensAnEarlierStall) {
  LayerTable t;
  t.layers = {Layer("l0", 1, 17, 10, 28), Layer("l1", 1, 9, 9, 19), Layer("l2", 1, 13, 4, 25),
              Layer("l3", 1, 16, 2, 20, 0, 0, /*forward_after=*/3)};
  const ForwardPlan plan = RunForwardAlgorithm(t);
  // l0 waits for its load (tag -1): 27, 10. l1 hidden: tag 1, 36, 10. l2:
  // 13 >= 10, base 43; turning l1 (slower 10, gain 19) gives 50: kept. l2
  // waits 3: 43, 4. l3: base 43 + 16 + 2 - 4 = 57; turning l1 gives
  // max(16 - 4 - 19, 0) + 43 + 10 + 2 = 55 < 57: turned. Then A: 58.
  EXPECT_THAT(plan.modes, ElementsAre(kGfgb, kDha, kGfgb, kGfgb));
  EXPECT_EQ(plan.all, 58);
  // Loads 0-17, 17-30 (l2), 30-46 (l3). l0 17-27, l1 27-46, l2 46-50, l3
  // 50-52, A 52-55: l2 no longer waits.
  EXPECT_EQ(EvaluateSchedule(t, plan.modes, true).forward_time, 55);
}

// A table of random layers: the same every run (a fixed seed).
LayerTable RandomTable(std::mt19937_64& random) {
  LayerTable t;
  t.forward_before_first = static_cast<Nanos>(random() % 3);
  const int layers = 1 + static_cast<int>(random() % 8);
  for (int i = 0; i < layers; ++i) {
    const Nanos forward = 1 + static_cast<Nanos>(random() % 10);
    const Nanos backward = 1 + static_cast<Nanos>(random() % 10);
    t.layers.push_back(Layer(absl::StrCat("l", i), 1 + random() % 10,
                             static_cast<Nanos>(random() % 20), forward,
                             forward + static_cast<Nanos>(random() % 30), backward,
                             backward + static_cast<Nanos>(random() % 8),
                             static_cast<Nanos>(random() % 4), static_cast<Nanos>(random() % 4)));
  }
  return t;
}

// What the case above shows holds in general: Algorithm 1's T_all never
// promises a forward shorter than the schedule of its own plan.
TEST(ForwardAlgorithmTest, AccountNeverUnderstatesTheSchedule) {
  std::mt19937_64 random(2024);
  for (int trial = 0; trial < 5000; ++trial) {
    const LayerTable t = RandomTable(random);
    for (const DhaCriterion criterion : {DhaCriterion::kWholeLoad, DhaCriterion::kExposedLoad}) {
      const ForwardPlan plan = RunForwardAlgorithm(t, criterion);
      ASSERT_GE(plan.all, EvaluateSchedule(t, plan.modes, true).forward_time)
          << "trial " << trial;
    }
  }
}

// --- The parameter budget ---

// Two loads hidden behind 20 units of input processing; both layers fit 200
// bytes.
LayerTable TwoHiddenLayers() {
  LayerTable t;
  t.forward_before_first = 20;
  t.layers = {Layer("cheap", 100, 10, 10, 25, 10, 11), Layer("costly", 100, 10, 10, 40, 10, 11)};
  return t;
}

TEST(ParameterBudgetTest, UnlimitedKeepsAlgorithmOnesPlan) {
  const absl::StatusOr<MemferryPlan> plan = PlanMemferry(TwoHiddenLayers(), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->modes, ElementsAre(kGfgb, kGfgb));
  EXPECT_EQ(plan->times.forward_time, 40);
  EXPECT_EQ(plan->times.iteration_time, 60);
  EXPECT_EQ(plan->parameter_bytes(), 200u);
}

TEST(ParameterBudgetTest, CheapestLayerPerByteGoesToTheHostFirst) {
  MemferryOptions options;
  options.parameter_budget_bytes = 150;
  const absl::StatusOr<MemferryPlan> plan = PlanMemferry(TwoHiddenLayers(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // "cheap" from the host: forward 20 + 25 + 10 = 55 (+15), backward +1.
  // "costly" would add 30 + 1. Then "cheap" could go DFGB, but not in 150.
  EXPECT_THAT(plan->modes, ElementsAre(kDha, kGfgb));
  EXPECT_EQ(plan->parameter_bytes(), 100u);
  EXPECT_EQ(plan->times.iteration_time, 55 + 10 + 11);
  EXPECT_THAT(Kinds(plan->decisions),
              ElementsAre(DecisionKind::kGfgbLoadHidden, DecisionKind::kGfgbLoadHidden,
                          DecisionKind::kBudgetToDha, DecisionKind::kDfgbRefusedBudget));
  EXPECT_EQ(plan->decisions[2].layer, 0);
  EXPECT_EQ(plan->decisions[2].delta, 16);
  // Algorithm 1's own plan is kept beside the final one.
  EXPECT_THAT(plan->forward.modes, ElementsAre(kGfgb, kGfgb));
}

TEST(ParameterBudgetTest, NoBudgetRunsEverythingFromTheHost) {
  MemferryOptions options;
  options.parameter_budget_bytes = 0;
  const absl::StatusOr<MemferryPlan> plan = PlanMemferry(TwoHiddenLayers(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->modes, ElementsAre(kDha, kDha));
  EXPECT_EQ(plan->parameter_bytes(), 0u);
  EXPECT_EQ(plan->times.iteration_time, 20 + 25 + 40 + 11 + 11);
}

// --- The DFGB greedy ---

TEST(DfgbTest, FigureSixPlan) {
  const absl::StatusOr<MemferryPlan> plan = PlanMemferry(FigureSix(), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Algorithm 1: l1 DHA (3 <= 12), l2 DHA (5 <= 9), l3 GFGB (20 > 9) hidden.
  EXPECT_THAT(plan->forward.modes, ElementsAre(kDha, kDha, kGfgb));
  EXPECT_EQ(plan->forward.reserve, 9);  // the link idles from 4 to 13
  // l2 saves 6 in backward, l1 1: l2 first. Its copy 8-14 is done before the
  // first gradient (19). With l1 as well, l1's copy (4-14) would go first
  // and push l2's to 14-20, past l2's backward start (19): refused.
  EXPECT_THAT(plan->modes, ElementsAre(kDha, kDfgb, kGfgb));
  EXPECT_THAT(Kinds(plan->decisions),
              ElementsAre(DecisionKind::kDhaByCriterion, DecisionKind::kDhaByCriterion,
                          DecisionKind::kGfgbLoadHidden, DecisionKind::kDfgbChosen,
                          DecisionKind::kDfgbRefusedLate));
  EXPECT_EQ(plan->decisions[3].layer, 1);
  EXPECT_EQ(plan->decisions[3].delta, 6);
  EXPECT_EQ(plan->times.iteration_time, 27);
  EXPECT_EQ(plan->times.late_copies, 0);
  EXPECT_EQ(plan->parameter_bytes(), 50u);
}

// A copy that can finish before its layer's backward but only after the
// first gradient: refused on the paper's shared link, taken on a
// full-duplex one.
TEST(DfgbTest, WindowClosesAtTheFirstGradientOnASharedLink) {
  LayerTable t;
  t.layers = {Layer("embedding", 10, 12, 1, 4, 2, 9, 0, /*backward_after=*/5),
              Layer("linear", 10, 4, 5, 30, 6, 7)};
  // Algorithm 1: embedding DHA, 4, 4; linear waits (4 >= 4, tag -1): 9.
  // The copy runs 4-16; the first gradient is ready at 9 + 6 = 15, the
  // embedding's backward starts at 20.
  const absl::StatusOr<MemferryPlan> shared = PlanMemferry(t, {});
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_THAT(shared->modes, ElementsAre(kDha, kGfgb));
  EXPECT_EQ(shared->times.iteration_time, 9 + 6 + 5 + 9);

  MemferryOptions duplex;
  duplex.gradients_share_link = false;
  const absl::StatusOr<MemferryPlan> apart = PlanMemferry(t, duplex);
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_THAT(apart->modes, ElementsAre(kDfgb, kGfgb));
  EXPECT_EQ(apart->times.iteration_time, 9 + 6 + 5 + 2);
}

// Over random tables and budgets: the plan fits its budget, no copy is
// late, and stages 2 and 3 only ever shorten what stage 2 left.
TEST(MemferryPlannerTest, PlansFitTheirBudgetWithNoLateCopy) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const LayerTable t = RandomTable(random);
    MemferryOptions options;
    options.parameter_budget_bytes = random() % 40;
    options.gradients_share_link = (trial % 2) == 0;
    const absl::StatusOr<MemferryPlan> plan = PlanMemferry(t, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_LE(plan->parameter_bytes(), options.parameter_budget_bytes) << "trial " << trial;
    ASSERT_EQ(plan->times.late_copies, 0) << "trial " << trial;
    std::vector<ExecutionMode> before_dfgb = plan->modes;
    for (ExecutionMode& mode : before_dfgb) {
      if (mode == kDfgb) mode = kDha;
    }
    ASSERT_LE(plan->times.iteration_time,
              EvaluateSchedule(t, before_dfgb, options.gradients_share_link).iteration_time)
        << "trial " << trial;
  }
}

TEST(MemferryPlannerTest, ExplainNamesEveryDecisionAndLayer) {
  LayerTable t;
  t.layers = {Layer("l0", 1, 20, 10, 10), Layer("l1", 1, 5, 4, 10), Layer("l2", 1, 30, 5, 60)};
  const absl::StatusOr<MemferryPlan> plan = PlanMemferry(t, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string text = ExplainPlan(t, *plan);
  EXPECT_THAT(text, HasSubstr("backtrack-to-dha  l1  for l2, forward 5 ns shorter"));
  EXPECT_THAT(text, HasSubstr("gfgb-backtracked  l2  load exposed 10 ns"));
  EXPECT_THAT(text, HasSubstr("GFGB l2: forward 30-35"));
}

// --- GO-MemFerry's gradient offload ---

GradientCosts Gradient(std::string name, uint64_t bytes, Nanos in_device, Nanos to_host) {
  return {std::move(name), bytes, in_device, to_host};
}

// The dynamic program, not a greedy: keeping the 4-byte layer (gain 5) uses
// the whole reserve, the two 2-byte ones gain 6 together.
TEST(GradientOffloadTest, KnapsackBeatsTheLargestGain) {
  const std::vector<GradientCosts> layers = {Gradient("big", 4, 10, 15),
                                             Gradient("a", 2, 10, 13), Gradient("b", 2, 10, 13)};
  GradientOffloadOptions options;
  options.reserve_factor = 0.5;  // 4 of 8 bytes
  options.size_unit_bytes = 1;
  const absl::StatusOr<GradientOffloadPlan> plan = PlanGradientOffload(layers, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->keep_in_device, ElementsAre(false, true, true));
  EXPECT_EQ(plan->reserve_bytes, 4u);
  EXPECT_EQ(plan->kept_bytes, 4u);
  EXPECT_EQ(plan->gain, 6);
  EXPECT_EQ(plan->backward_time, 15 + 13 + 13 - 6);
}

TEST(GradientOffloadTest, ReserveBoundsAndLayersThatGainNothing) {
  const std::vector<GradientCosts> layers = {
      Gradient("slow", 4, 10, 30), Gradient("faster_offloaded", 4, 10, 8),
      Gradient("even", 4, 10, 10)};
  GradientOffloadOptions options;
  options.size_unit_bytes = 1;
  options.reserve_factor = 0;
  absl::StatusOr<GradientOffloadPlan> plan = PlanGradientOffload(layers, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->keep_in_device, ElementsAre(false, false, false));
  EXPECT_EQ(plan->backward_time, 30 + 8 + 10);
  // With room for everything, only the layer that gains is kept.
  options.reserve_factor = 1;
  plan = PlanGradientOffload(layers, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->keep_in_device, ElementsAre(true, false, false));
  EXPECT_EQ(plan->kept_bytes, 4u);
  EXPECT_EQ(plan->backward_time, 10 + 8 + 10);
}

TEST(GradientOffloadTest, KeptBytesNeverExceedTheReserve) {
  // Sizes that are not whole pages, and a table too wide for 2^16 columns.
  std::vector<GradientCosts> layers;
  for (int i = 0; i < 12; ++i) {
    layers.push_back(Gradient(absl::StrCat("l", i), (uint64_t{3} << 30) + 4097 * i, 100,
                              200 + 37 * i));
  }
  for (int step = 0; step <= 20; ++step) {
    GradientOffloadOptions options;
    options.reserve_factor = step / 20.0;
    const absl::StatusOr<GradientOffloadPlan> plan = PlanGradientOffload(layers, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_LE(plan->kept_bytes, plan->reserve_bytes) << "reserve factor " << step / 20.0;
    EXPECT_LE(plan->reserve_bytes / plan->size_unit_bytes, kMaxCapacityUnits);
    if (step > 0) {
      EXPECT_GT(plan->size_unit_bytes, kPageSize);  // widened
    }
  }
}

TEST(GradientOffloadTest, AReserveThatHoldsEveryGradientKeepsEveryOneThatGains) {
  // The same widened table: each layer rounded up to whole units, the 12 of
  // them would take more columns than a reserve of 1 has, and one would be
  // left out.
  std::vector<GradientCosts> layers;
  uint64_t total = 0;
  for (int i = 0; i < 12; ++i) {
    layers.push_back(Gradient(absl::StrCat("l", i), (uint64_t{3} << 30) + 4097 * i, 100,
                              200 + 37 * i));
    total += layers.back().gradient_bytes;
  }
  GradientOffloadOptions options;
  options.reserve_factor = 1;
  const absl::StatusOr<GradientOffloadPlan> plan = PlanGradientOffload(layers, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->keep_in_device, Each(true));
  EXPECT_EQ(plan->kept_bytes, total);
  EXPECT_EQ(plan->backward_time, 12 * 100);
}

TEST(GradientOffloadTest, RefusesBadOptions) {
  const std::vector<GradientCosts> layers = {Gradient("l", 4, 10, 20)};
  for (const double factor : {-0.1, 1.5, std::nan("")}) {
    GradientOffloadOptions options;
    options.reserve_factor = factor;
    EXPECT_EQ(PlanGradientOffload(layers, options).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  GradientOffloadOptions zero_unit;
  zero_unit.size_unit_bytes = 0;
  EXPECT_FALSE(PlanGradientOffload(layers, zero_unit).ok());
  EXPECT_FALSE(PlanGradientOffload({Gradient("l", 4, -1, 20)}, {}).ok());
}

// The paper's Fig. 10(b): iteration time falls as the reserve factor grows,
// and the curve is convex. On a transformer's repeated blocks (gradients of
// one size, gains that differ by where the block sits) the plan keeps the k
// largest gains for a reserve of k blocks, so each step gains less than the
// one before.
TEST(GradientOffloadTest, BackwardTimeIsConvexInTheReserveFactor) {
  constexpr int kBlocks = 16;  // a power of two: k / 16 is exact
  const uint64_t block_bytes = 7 * kPageSize;
  std::vector<GradientCosts> layers;
  Nanos all_to_host = 0;
  std::vector<Nanos> gains;
  for (int i = 0; i < kBlocks; ++i) {
    const Nanos in_device = 1000;
    const Nanos gain = 50 + (i * 37) % 101;  // distinct, in no order
    layers.push_back(Gradient(absl::StrCat("h", i), block_bytes, in_device, in_device + gain));
    all_to_host += in_device + gain;
    gains.push_back(gain);
  }
  std::sort(gains.rbegin(), gains.rend());
  std::vector<Nanos> time;
  Nanos best_gains = 0;
  for (int k = 0; k <= kBlocks; ++k) {
    GradientOffloadOptions options;
    options.reserve_factor = static_cast<double>(k) / kBlocks;
    const absl::StatusOr<GradientOffloadPlan> plan = PlanGradientOffload(layers, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    if (k > 0) best_gains += gains[static_cast<size_t>(k - 1)];
    EXPECT_EQ(plan->backward_time, all_to_host - best_gains) << "k " << k;
    time.push_back(plan->backward_time);
  }
  for (size_t k = 1; k + 1 < time.size(); ++k) {
    EXPECT_LT(time[k], time[k - 1]) << "k " << k;
    EXPECT_GE(time[k + 1] - time[k], time[k] - time[k - 1]) << "k " << k;  // convex
  }
}

}  // namespace
}  // namespace umlab::testing
