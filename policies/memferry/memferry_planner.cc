#include "policies/memferry/memferry_planner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace umlab {

const char* DecisionKindName(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kDhaByCriterion:
      return "dha";
    case DecisionKind::kGfgbLoadHidden:
      return "gfgb-hidden";
    case DecisionKind::kGfgbAfterBacktrack:
      return "gfgb-backtracked";
    case DecisionKind::kBacktrackToDha:
      return "backtrack-to-dha";
    case DecisionKind::kBudgetToDha:
      return "budget-to-dha";
    case DecisionKind::kDfgbChosen:
      return "dfgb";
    case DecisionKind::kDfgbRefusedLate:
      return "dfgb-late";
    case DecisionKind::kDfgbRefusedBudget:
      return "dfgb-over-budget";
  }
  return "?";
}

namespace {

// Algorithm 1 as the paper prints it (§IV-B), with these readings where the
// text is ambiguous or inconsistent. Line numbers are the algorithm's.
//
//  (a) Line 3 prints T^H_FP(l) <= T_FP(l) + max(T_trans(l), 0). Taken
//      literally (DhaCriterion::kWholeLoad, the default): DHA when the host
//      forward is no slower than loading and computing on the GPU, which is
//      the comparison of Fig. 3(b) and of the text ("When the DHA
//      computation time is less than on-GPU computation with loading time");
//      the max(., 0) is then a no-op. A max of a time that cannot be negative
//      suggests a subtraction lost in typesetting: max(T_trans(l) - T_res, 0)
//      (kExposedLoad) charges only the load T_res cannot hide. That reading
//      sends a memory-light layer whose small load fits the reserve (a
//      LayerNorm) to the GPU, against the evaluation's crossover (Embedding
//      and LayerNorm win under DHA, Linear and Convolution on the GPU), so it
//      is not the default; it is an option because it wastes less of the
//      reserve (a layer whose load would have hidden is not made to pay
//      T^H_FP - T_FP), and which of the two predicts real runs better is a
//      question for measurements.
//  (b) Line 9's T_trans is T_trans(l).
//  (c) Line 11 with tag = -1 (no GFGB layer has hidden its load since the
//      start or the last change): the backtracking window is empty.
//  (d) Line 19 runs i from bt "to l", but l is the layer being placed (line 3
//      has already refused it DHA, line 13 makes it GFGB) and a DHA layer in
//      the range has nothing to change: the loop visits the GFGB layers of
//      [bt, l), "the previous GFGB layers" of Fig. 7's caption.
//  (e) Lines 24-25 update base and T^b_res but not T^b_all, so after one
//      change line 22 would leave the first change's added compute out of
//      the next candidate's T^i_all and compare it with a base that has it.
//      T^b_all grows by T^H_FP(i) - T_FP(i) with each change, so T^i_all is
//      the forward time with every change so far.
//  (f) Line 23's "baseline" is line 18's base.
//  (g) Line 29 passes base, already the whole forward time to the end of
//      layer l (line 18), and max(T^b_res - T_trans(l), 0) + T_FP(l), already
//      the whole reserve after it, to update, which adds (line 31). Adding
//      would count the forward twice: they are assigned.
//  (h) The parameter-free computation before the first layer (A_{0,1}, not
//      in the paper's indexing) is accounted as line 15 accounts the others:
//      update(T, T) before the loop.
//  (i) Line 5 adds a DHA layer's whole forward to T_res, the time the link
//      is free for loads: in the paper DHA reads do not use it. Where they
//      share it (LayerCosts::forward_link, umlab's link), the time they
//      hold it is left out. With forward_link 0 this is the printed line.
class ForwardAlgorithm {
 public:
  ForwardAlgorithm(const LayerTable& table, DhaCriterion criterion)
      : layers_(table.layers), criterion_(criterion) {
    plan_.modes.assign(layers_.size(), ExecutionMode::kGfgb);
    Update(table.forward_before_first, table.forward_before_first);  // (h)
  }

  ForwardPlan Run() {
    for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {  // line 2
      const LayerCosts& c = layers_[static_cast<size_t>(l)];
      if (c.forward_from_host <= c.forward + ChargedLoad(c)) {  // line 3
        plan_.modes[static_cast<size_t>(l)] = ExecutionMode::kDha;  // line 4
        Update(c.forward_from_host, HostForwardReserve(c));        // line 5, reading (i)
        Decide(DecisionKind::kDhaByCriterion, l);
      } else {
        if (c.transfer < plan_.reserve) {                    // line 7
          if (plan_.tag == -1) plan_.tag = l;                // line 8
          Update(c.forward, c.forward - c.transfer);          // line 9, reading (b)
          Decide(DecisionKind::kGfgbLoadHidden, l);
        } else {
          Backtrack(l);                                      // line 11
        }
        plan_.modes[static_cast<size_t>(l)] = ExecutionMode::kGfgb;  // line 13
      }
      Update(c.forward_after, c.forward_after);  // line 15: A_{l,l+1}
    }
    return std::move(plan_);  // line 17
  }

 private:
  // Line 5's T_res for a DHA layer, reading (i): its forward, less the time
  // its reads hold the link where they share it with copies.
  static Nanos HostForwardReserve(const LayerCosts& c) {
    return std::max<Nanos>(c.forward_from_host - c.forward_link, 0);
  }

  // Line 3's load term, reading (a).
  Nanos ChargedLoad(const LayerCosts& c) const {
    if (criterion_ == DhaCriterion::kExposedLoad) {
      return std::max<Nanos>(c.transfer - plan_.reserve, 0);
    }
    return c.transfer;
  }

  // Lines 18-29 (the function's T^b_all and T^b_res are `all` and `reserve`).
  void Backtrack(int l) {
    const LayerCosts& placed = layers_[static_cast<size_t>(l)];
    Nanos all = plan_.all;
    Nanos reserve = plan_.reserve;
    Nanos base = all + placed.transfer + placed.forward - reserve;  // line 18
    if (plan_.tag != -1) {                                         // reading (c)
      for (int i = plan_.tag; i < l; ++i) {                        // line 19, reading (d)
        if (plan_.modes[static_cast<size_t>(i)] != ExecutionMode::kGfgb) continue;
        const LayerCosts& c = layers_[static_cast<size_t>(i)];
        const Nanos slower = c.forward_from_host - c.forward;
        const Nanos gain = c.transfer + slower;  // line 20
        const Nanos all_i =                      // lines 21-22
            std::max<Nanos>(placed.transfer - reserve - gain, 0) + all + slower + placed.forward;
        if (all_i < base) {  // line 23, reading (f)
          plan_.modes[static_cast<size_t>(i)] = ExecutionMode::kDha;  // line 24
          plan_.tag = i + 1;
          plan_.decisions.push_back(
              {DecisionKind::kBacktrackToDha, i, l, all_i, reserve + gain, base - all_i});
          base = all_i;  // line 25
          reserve += gain;
          all += slower;  // reading (e)
          if (reserve >= placed.transfer) break;  // line 26
        }
      }
    }
    // Line 29, reading (g).
    plan_.all = base;
    plan_.reserve = std::max<Nanos>(reserve - placed.transfer, 0) + placed.forward;
    Decide(DecisionKind::kGfgbAfterBacktrack, l, -1,
           std::max<Nanos>(placed.transfer - reserve, 0));
  }

  // Lines 30-31.
  void Update(Nanos overall, Nanos reserved) {
    plan_.all += overall;
    plan_.reserve += reserved;
  }

  void Decide(DecisionKind kind, int layer, int for_layer = -1, Nanos delta = 0) {
    plan_.decisions.push_back({kind, layer, for_layer, plan_.all, plan_.reserve, delta});
  }

  const std::vector<LayerCosts>& layers_;
  const DhaCriterion criterion_;
  ForwardPlan plan_;
};

// Stage 2: the cheapest GFGB layers, per byte, go DHA until the rest fit.
void FitParameterBudget(const LayerTable& table, const MemferryOptions& options,
                        std::vector<ExecutionMode>& modes, std::vector<PlanDecision>& decisions) {
  ScheduleTimes now = EvaluateSchedule(table, modes, options.gradients_share_link);
  while (now.parameter_bytes > options.parameter_budget_bytes) {
    int best = -1;
    Nanos best_cost = 0;
    uint64_t best_bytes = 0;
    ScheduleTimes best_times;
    for (size_t l = 0; l < modes.size(); ++l) {
      const uint64_t bytes = table.layers[l].parameter_bytes;
      if (modes[l] != ExecutionMode::kGfgb || bytes == 0) continue;
      modes[l] = ExecutionMode::kDha;
      ScheduleTimes times = EvaluateSchedule(table, modes, options.gradients_share_link);
      modes[l] = ExecutionMode::kGfgb;
      const Nanos cost = times.iteration_time - now.iteration_time;
      // cost / bytes < best_cost / best_bytes, exactly; the first layer wins a tie.
      if (best == -1 || static_cast<__int128>(cost) * best_bytes <
                            static_cast<__int128>(best_cost) * bytes) {
        best = static_cast<int>(l);
        best_cost = cost;
        best_bytes = bytes;
        best_times = std::move(times);
      }
    }
    // Unreachable while the bytes are over the budget: some GFGB layer holds them.
    if (best == -1) break;
    modes[static_cast<size_t>(best)] = ExecutionMode::kDha;
    decisions.push_back({DecisionKind::kBudgetToDha, best, -1, 0, 0, best_cost});
    now = std::move(best_times);
  }
}

// Stage 3: DHA layers to DFGB, largest backward saving first, each while
// every copy stays in the idle window and the parameters fit.
void ChooseDfgbLayers(const LayerTable& table, const MemferryOptions& options,
                      std::vector<ExecutionMode>& modes, std::vector<PlanDecision>& decisions) {
  std::vector<int> candidates;
  for (size_t l = 0; l < modes.size(); ++l) {
    const LayerCosts& c = table.layers[l];
    if (modes[l] == ExecutionMode::kDha && c.backward_from_host > c.backward) {
      candidates.push_back(static_cast<int>(l));
    }
  }
  auto saving = [&table](int l) {
    const LayerCosts& c = table.layers[static_cast<size_t>(l)];
    return c.backward_from_host - c.backward;
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&saving](int a, int b) { return saving(a) > saving(b); });
  uint64_t bytes = EvaluateSchedule(table, modes, options.gradients_share_link).parameter_bytes;
  for (const int l : candidates) {
    const uint64_t layer_bytes = table.layers[static_cast<size_t>(l)].parameter_bytes;
    if (layer_bytes > options.parameter_budget_bytes - bytes) {  // bytes <= the budget
      decisions.push_back({DecisionKind::kDfgbRefusedBudget, l, -1, 0, 0, 0});
      continue;
    }
    modes[static_cast<size_t>(l)] = ExecutionMode::kDfgb;
    if (EvaluateSchedule(table, modes, options.gradients_share_link).late_copies > 0) {
      modes[static_cast<size_t>(l)] = ExecutionMode::kDha;
      decisions.push_back({DecisionKind::kDfgbRefusedLate, l, -1, 0, 0, 0});
      continue;
    }
    bytes += layer_bytes;
    decisions.push_back({DecisionKind::kDfgbChosen, l, -1, 0, 0, saving(l)});
  }
}

}  // namespace

ForwardPlan RunForwardAlgorithm(const LayerTable& table, DhaCriterion criterion) {
  return ForwardAlgorithm(table, criterion).Run();
}

absl::StatusOr<MemferryPlan> PlanMemferry(const LayerTable& table,
                                          const MemferryOptions& options) {
  if (absl::Status valid = ValidateLayerTable(table); !valid.ok()) return valid;
  MemferryPlan plan;
  plan.forward = RunForwardAlgorithm(table, options.dha_criterion);
  plan.modes = plan.forward.modes;
  plan.decisions = plan.forward.decisions;
  FitParameterBudget(table, options, plan.modes, plan.decisions);
  ChooseDfgbLayers(table, options, plan.modes, plan.decisions);
  plan.times = EvaluateSchedule(table, plan.modes, options.gradients_share_link);
  return plan;
}

std::string ExplainPlan(const LayerTable& table, const MemferryPlan& plan) {
  auto name = [&table](int l) {
    const std::string& n = table.layers[static_cast<size_t>(l)].name;
    return n.empty() ? absl::StrFormat("layer %d", l) : n;
  };
  std::string out;
  for (const PlanDecision& d : plan.decisions) {
    absl::StrAppendFormat(&out, "%-17s %s", DecisionKindName(d.kind), name(d.layer));
    switch (d.kind) {
      case DecisionKind::kDhaByCriterion:
      case DecisionKind::kGfgbLoadHidden:
        absl::StrAppendFormat(&out, "  T_all %d ns, T_res %d ns", d.all, d.reserve);
        break;
      case DecisionKind::kGfgbAfterBacktrack:
        absl::StrAppendFormat(&out, "  load exposed %d ns; T_all %d ns, T_res %d ns", d.delta,
                              d.all, d.reserve);
        break;
      case DecisionKind::kBacktrackToDha:
        absl::StrAppendFormat(&out, "  for %s, forward %d ns shorter", name(d.for_layer),
                              d.delta);
        break;
      case DecisionKind::kBudgetToDha:
        absl::StrAppendFormat(&out, "  iteration %+d ns", d.delta);
        break;
      case DecisionKind::kDfgbChosen:
        absl::StrAppendFormat(&out, "  backward %d ns shorter", d.delta);
        break;
      case DecisionKind::kDfgbRefusedLate:
      case DecisionKind::kDfgbRefusedBudget:
        break;
    }
    out += '\n';
  }
  const ScheduleTimes& t = plan.times;
  absl::StrAppendFormat(&out,
                        "forward %d ns (Algorithm 1 expected %d), backward %d ns, iteration %d "
                        "ns, parameters on the device %d bytes\n",
                        t.forward_time, plan.forward.all, t.backward_time, t.iteration_time,
                        t.parameter_bytes);
  for (size_t l = 0; l < plan.modes.size() && l < t.layers.size(); ++l) {
    const LayerTimes& lt = t.layers[l];
    absl::StrAppendFormat(&out, "  %-4s %s: forward %d-%d", ExecutionModeName(plan.modes[l]),
                          name(static_cast<int>(l)), lt.forward_start, lt.forward_end);
    if (lt.forward_stall > 0) absl::StrAppendFormat(&out, " (waited %d)", lt.forward_stall);
    if (plan.modes[l] == ExecutionMode::kDfgb) {
      absl::StrAppendFormat(&out, ", copy %d-%d", lt.copy_start, lt.copy_end);
    }
    absl::StrAppendFormat(&out, ", backward %d-%d\n", lt.backward_start, lt.backward_end);
  }
  return out;
}

}  // namespace umlab
