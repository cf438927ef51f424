#include "policies/memferry/go_memferry_planner.h"

#include <utility>

namespace umlab {

std::vector<GradientCosts> GradientCostsUnder(const ProgramLayers& layers,
                                              absl::Span<const ExecutionMode> modes) {
  std::vector<GradientCosts> costs(layers.table.layers.size());
  for (size_t l = 0; l < costs.size(); ++l) {
    const LayerCosts& layer = layers.table.layers[l];
    const LayerGradients& gradients = layers.gradients[l];
    const bool parameters_remote = l < modes.size() && modes[l] == ExecutionMode::kDha;
    costs[l].name = layer.name;
    costs[l].gradient_bytes = gradients.bytes;
    costs[l].backward_in_device = parameters_remote ? layer.backward_from_host : layer.backward;
    costs[l].backward_to_host =
        parameters_remote ? gradients.backward_from_host : gradients.backward;
  }
  return costs;
}

LayerTable WithGradientsOnHost(const ProgramLayers& layers, const std::vector<bool>& on_host) {
  LayerTable table = layers.table;
  for (size_t l = 0; l < table.layers.size() && l < on_host.size(); ++l) {
    if (!on_host[l]) continue;
    const LayerGradients& gradients = layers.gradients[l];
    table.layers[l].backward = gradients.backward;
    table.layers[l].backward_from_host = gradients.backward_from_host;
    table.layers[l].gradient_link = gradients.link;
  }
  return table;
}

std::vector<bool> GradientsOnHost(const GradientOffloadPlan& plan) {
  std::vector<bool> on_host(plan.keep_in_device.size());
  for (size_t l = 0; l < on_host.size(); ++l) on_host[l] = !plan.keep_in_device[l];
  return on_host;
}

absl::StatusOr<GoMemferryPlan> PlanGoMemferry(const ProgramLayers& layers, double reserve_factor,
                                              uint64_t parameter_budget_bytes,
                                              bool gradients_share_link,
                                              ModePlanner plan_modes) {
  GradientOffloadOptions options;
  options.reserve_factor = reserve_factor;
  GoMemferryPlan plan;

  // 1. Gradients, every layer's parameters on the device.
  const std::vector<ExecutionMode> on_device(layers.table.layers.size(), ExecutionMode::kGfgb);
  absl::StatusOr<GradientOffloadPlan> first =
      PlanGradientOffload(GradientCostsUnder(layers, on_device), options);
  if (!first.ok()) return first.status();
  plan.first_gradients = *std::move(first);

  // 2. Modes, on the table with those gradients on the host, within what
  // the gradients the reserve allows leave of the budget.
  const uint64_t reserve = plan.first_gradients.reserve_bytes;
  plan.parameter_budget_bytes =
      parameter_budget_bytes > reserve ? parameter_budget_bytes - reserve : 0;
  absl::StatusOr<MemferryPlan> modes =
      plan_modes(WithGradientsOnHost(layers, GradientsOnHost(plan.first_gradients)),
                 plan.parameter_budget_bytes);
  if (!modes.ok()) return modes.status();
  plan.modes = *std::move(modes);

  // 3. Gradients again, under those modes.
  absl::StatusOr<GradientOffloadPlan> gradients =
      PlanGradientOffload(GradientCostsUnder(layers, plan.modes.modes), options);
  if (!gradients.ok()) return gradients.status();
  plan.gradients = *std::move(gradients);
  for (size_t l = 0; l < plan.gradients.keep_in_device.size(); ++l) {
    if (plan.gradients.keep_in_device[l] != plan.first_gradients.keep_in_device[l]) {
      ++plan.gradients_replanned;
    }
  }
  plan.modes.times = EvaluateSchedule(WithGradientsOnHost(layers, GradientsOnHost(plan.gradients)),
                                      plan.modes.modes, gradients_share_link);
  return plan;
}

}  // namespace umlab
