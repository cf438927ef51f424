// MemFerry's planner (Yao et al., §IV-B): an execution mode per layer (GFGB,
// DHA or DFGB, hybrid_schedule.h) from the layers' profiled times, in three
// stages:
//
//  1. The forward algorithm (Algorithm 1, "MemFerry FP Algorithm"): a greedy
//     pass in forward order that runs a layer by DHA when that is no slower
//     than loading and computing it, and otherwise loads it (GFGB); when a
//     load cannot hide in the reserved overlap time T_res, it backtracks over
//     the GFGB layers since `tag` and turns to DHA those whose change hides
//     more load time than it adds compute. memferry_planner.cc states, line
//     by line, how each of the algorithm's ambiguities is read.
//  2. The parameter budget (not in the paper, whose algorithm has no memory
//     limit): while the GFGB layers' parameters exceed the device memory
//     given to parameters, the GFGB layer whose change to DHA costs the
//     least iteration time per byte becomes DHA. §IV-D's own remark that
//     "further offloading model parameters will significantly decrease the
//     training speed" is the reason to take the cheapest first.
//  3. The backward algorithm: "a greedy algorithm to decide whether the
//     layers are executed in DFGB mode" (§IV-B; the paper gives no more).
//     DHA layers, those whose GPU backward saves the most time first
//     ("that can reduce the BP time most", §I), become DFGB while the copy
//     fits the link's idle window before its backward and the budget.
//
// Pure: no engine, no backend. The predicted times are those of
// EvaluateSchedule on the final modes; Algorithm 1's running account of the
// forward (T_all, T_res, tag) is kept beside them.
#ifndef UMLAB_POLICIES_MEMFERRY_MEMFERRY_PLANNER_H_
#define UMLAB_POLICIES_MEMFERRY_MEMFERRY_PLANNER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "policies/memferry/hybrid_schedule.h"

namespace umlab {

// How Algorithm 1's line 3 weighs a layer's load against its DHA forward
// (memferry_planner.cc, reading (a), says why there are two).
enum class DhaCriterion : uint8_t {
  // T^H_FP(l) <= T_FP(l) + T_trans(l): the line as printed, the comparison of
  // the paper's Fig. 3(b). The default.
  kWholeLoad,
  // T^H_FP(l) <= T_FP(l) + max(T_trans(l) - T_res, 0): only the load the
  // reserve cannot hide counts.
  kExposedLoad,
};

struct MemferryOptions {
  DhaCriterion dha_criterion = DhaCriterion::kWholeLoad;
  // Device memory for the parameter buffers (GFGB and DFGB layers), after
  // activations, gradients and workspace: no limit by default, as in the
  // paper's algorithm.
  uint64_t parameter_budget_bytes = std::numeric_limits<uint64_t>::max();
  // The paper's link carries one transfer at a time, so the idle window for
  // DFGB copies closes when gradients start to drain (§IV-B). On a
  // full-duplex link (LinkConfig::full_duplex) the drain goes the other way
  // and a copy need only be done before its layer's backward.
  bool gradients_share_link = true;
};

// One step of the planner's reasoning, in the order it was taken.
enum class DecisionKind : uint8_t {
  // Algorithm 1, lines 3-5: T^H_FP <= T_FP + T_trans, so DHA.
  kDhaByCriterion,
  // Lines 7-9, 13: GFGB, its load hidden in T_res.
  kGfgbLoadHidden,
  // Lines 11, 13, 29: GFGB after backtracking; `delta` is the load time the
  // compute still waits for (0: backtracking hid it all).
  kGfgbAfterBacktrack,
  // Lines 23-25: `layer` turned from GFGB to DHA to hide the load of
  // `for_layer`; `delta` is the forward time it saved.
  kBacktrackToDha,
  // Stage 2: GFGB to DHA for the budget; `delta` is the iteration time it
  // added (negative: it saved time).
  kBudgetToDha,
  // Stage 3: DHA to DFGB; `delta` is the backward time saved.
  kDfgbChosen,
  // Stage 3, refused: the copy would not be done in the idle window before
  // its backward (or would make another's late).
  kDfgbRefusedLate,
  // Stage 3, refused: the parameters do not fit the budget.
  kDfgbRefusedBudget,
};
const char* DecisionKindName(DecisionKind kind);

struct PlanDecision {
  DecisionKind kind = DecisionKind::kDhaByCriterion;
  int layer = 0;
  int for_layer = -1;  // kBacktrackToDha only
  // Algorithm 1's T_all and T_res once the decision is made (stage 1 only).
  Nanos all = 0;
  Nanos reserve = 0;
  Nanos delta = 0;  // as the kind says
};

// Algorithm 1's result: every layer GFGB or DHA, and its own account.
struct ForwardPlan {
  std::vector<ExecutionMode> modes;
  Nanos all = 0;      // T_all: the forward time it expects
  Nanos reserve = 0;  // T_res at the end: how long the link has been idle
  int tag = -1;       // the first GFGB layer a later backtrack may change
  std::vector<PlanDecision> decisions;
};

// Algorithm 1 over `table`, which must be valid (ValidateLayerTable).
ForwardPlan RunForwardAlgorithm(const LayerTable& table,
                                DhaCriterion criterion = DhaCriterion::kWholeLoad);

struct MemferryPlan {
  std::vector<ExecutionMode> modes;
  ScheduleTimes times;  // the predicted iteration (EvaluateSchedule)
  ForwardPlan forward;  // stage 1 as it stood before stages 2 and 3
  std::vector<PlanDecision> decisions;  // all three stages
  uint64_t parameter_bytes() const { return times.parameter_bytes; }
};

absl::StatusOr<MemferryPlan> PlanMemferry(const LayerTable& table,
                                          const MemferryOptions& options);

// The plan as text, for a report: the decisions, then a line per layer with
// its mode and times.
std::string ExplainPlan(const LayerTable& table, const MemferryPlan& plan);

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_MEMFERRY_PLANNER_H_
