// GO-MemFerry's planner (Yao et al., §IV-D): MemFerry's execution modes and
// the gradient offload plan, made together because each depends on the
// other:
//  - a layer's gain from keeping its gradient on the device, T_GBP - T_CBP,
//    depends on its mode: a DHA layer's backward already reads its
//    parameters over the link, so writing its gradient there as well slows
//    it by another amount than a GPU backward's;
//  - the modes depend on the gradients through memory (gradients kept on
//    the device take room the parameters could have) and through time (a
//    backward slowed by its gradient writes gives DFGB copies a longer
//    window, and on a half-duplex link the writes hold the lane copies use).
// The paper gives no order: GO-MemFerry is "based on the aforementioned
// scheduling algorithms", and the reserve factor applies "even after
// offloading some parameters". So the plan is made in three steps:
//  1. Gradients, with every layer's parameters on the device (T_CBP is the
//     GPU backward): the modes are not known yet.
//  2. Modes, by the policy's mode planner, on the layer table with step 1's
//     gradients in host memory, and with a parameter budget that leaves
//     room for every gradient byte the reserve lets stay on the device
//     (S_req x all gradient bytes). Step 3 keeps no more than that, so it
//     cannot push parameters and gradients past what step 2 was given. The
//     memory the offload frees, (1 - S_req) x the gradient bytes, is what
//     this budget gains over one that keeps every gradient.
//  3. Gradients again, under step 2's modes: the plan carried out.
// The predicted times are EvaluateSchedule's on the table with step 3's
// gradients in host memory. Pure: no engine, no backend.
#ifndef UMLAB_POLICIES_MEMFERRY_GO_MEMFERRY_PLANNER_H_
#define UMLAB_POLICIES_MEMFERRY_GO_MEMFERRY_PLANNER_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "policies/memferry/gradient_offload_planner.h"
#include "policies/memferry/hybrid_schedule.h"
#include "policies/memferry/layer_table_builder.h"
#include "policies/memferry/memferry_planner.h"

namespace umlab {

// Per layer, T_CBP (its backward under its mode, gradients in HBM) and
// T_GBP (the same with its gradients written to host memory), and its
// gradient bytes: the gradient offload planner's input.
std::vector<GradientCosts> GradientCostsUnder(const ProgramLayers& layers,
                                              absl::Span<const ExecutionMode> modes);

// Per layer, whether the plan writes its gradients to host memory.
std::vector<bool> GradientsOnHost(const GradientOffloadPlan& plan);

// The layer table with the layers whose `on_host` is true writing their
// gradients to host memory: their backward times and gradient lane as
// LayerGradients gives them.
LayerTable WithGradientsOnHost(const ProgramLayers& layers, const std::vector<bool>& on_host);

// Chooses the modes for a table within a parameter budget (the memferry
// policy's planner, or one of its single-mode baselines).
using ModePlanner = absl::FunctionRef<absl::StatusOr<MemferryPlan>(
    const LayerTable& table, uint64_t parameter_budget_bytes)>;

struct GoMemferryPlan {
  // Step 2's modes, with the times of the table under step 3's gradients.
  MemferryPlan modes;
  GradientOffloadPlan first_gradients;  // step 1
  GradientOffloadPlan gradients;        // step 3: the plan carried out
  uint64_t parameter_budget_bytes = 0;  // what step 2 was given
  // Layers whose gradient placement step 3 changed from step 1's.
  int gradients_replanned = 0;
};

// `parameter_budget_bytes` is the device memory the parameters and the
// gradients kept may take together; InvalidArgument for a reserve factor
// outside [0, 1], and the mode planner's errors.
absl::StatusOr<GoMemferryPlan> PlanGoMemferry(const ProgramLayers& layers, double reserve_factor,
                                              uint64_t parameter_budget_bytes,
                                              bool gradients_share_link,
                                              ModePlanner plan_modes);

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_GO_MEMFERRY_PLANNER_H_
