#include "policies/memferry/gradient_offload_planner.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"

namespace umlab {

absl::StatusOr<GradientOffloadPlan> PlanGradientOffload(const std::vector<GradientCosts>& layers,
                                                        const GradientOffloadOptions& options) {
  // Written so that NaN fails too.
  if (!(options.reserve_factor >= 0 && options.reserve_factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the gradient reserve factor is %g; it is a fraction of the gradients, in [0, 1]",
        options.reserve_factor));
  }
  if (options.size_unit_bytes == 0) {
    return absl::InvalidArgumentError("the gradient offload planner's size unit is 0 bytes");
  }
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const GradientCosts& c = layers[i];
    if (c.backward_in_device < 0 || c.backward_to_host < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("layer %d (%s) has a negative backward time", i, c.name));
    }
    total_bytes += c.gradient_bytes;
  }

  GradientOffloadPlan plan;
  plan.keep_in_device.assign(layers.size(), false);
  plan.reserve_bytes = static_cast<uint64_t>(
      std::floor(static_cast<long double>(options.reserve_factor) * total_bytes));
  // The unit, widened so the capacity takes at most kMaxCapacityUnits columns.
  plan.size_unit_bytes = std::max(options.size_unit_bytes,
                                  (plan.reserve_bytes + kMaxCapacityUnits - 1) / kMaxCapacityUnits);
  for (const GradientCosts& c : layers) plan.backward_time += c.backward_to_host;
  if (total_bytes <= plan.reserve_bytes) {
    // Everything fits: every layer that gains is kept, with no rounding of
    // sizes to the program's units to lose any of the reserve.
    for (size_t i = 0; i < layers.size(); ++i) {
      const Nanos gain = layers[i].backward_to_host - layers[i].backward_in_device;
      if (gain <= 0) continue;
      plan.keep_in_device[i] = true;
      plan.kept_bytes += layers[i].gradient_bytes;
      plan.gain += gain;
    }
    plan.backward_time -= plan.gain;
    return plan;
  }
  const uint64_t unit = plan.size_unit_bytes;
  const size_t capacity = static_cast<size_t>(plan.reserve_bytes / unit);
  const size_t columns = capacity + 1;

  // D(i, j) in one row, rewritten layer by layer from the right (so that
  // D(i-1, j - S_i) is still the previous layer's when it is read), and
  // which layers were kept at which capacity, to walk the choices back.
  std::vector<Nanos> best(columns, 0);
  std::vector<bool> kept(layers.size() * columns, false);
  std::vector<size_t> units(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const GradientCosts& c = layers[i];
    units[i] = static_cast<size_t>((c.gradient_bytes + unit - 1) / unit);
    const Nanos gain = c.backward_to_host - c.backward_in_device;
    // A layer that gains nothing stays offloaded: keeping it only takes room.
    if (gain <= 0 || units[i] > capacity) continue;
    for (size_t j = capacity + 1; j-- > units[i];) {
      const Nanos keep = best[j - units[i]] + gain;
      if (keep > best[j]) {  // a tie keeps the plan made without this layer
        best[j] = keep;
        kept[i * columns + j] = true;
      }
    }
  }
  size_t j = capacity;
  for (size_t i = layers.size(); i-- > 0;) {
    if (!kept[i * columns + j]) continue;
    plan.keep_in_device[i] = true;
    plan.kept_bytes += layers[i].gradient_bytes;
    j -= units[i];
  }
  plan.gain = best[capacity];
  plan.backward_time -= plan.gain;
  return plan;
}

}  // namespace umlab
