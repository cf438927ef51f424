#include "policies/memferry/hybrid_schedule.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace umlab {

const char* ExecutionModeName(ExecutionMode mode) {
  switch (mode) {
    case ExecutionMode::kGfgb:
      return "GFGB";
    case ExecutionMode::kDha:
      return "DHA";
    case ExecutionMode::kDfgb:
      return "DFGB";
  }
  return "?";
}

absl::Status ValidateLayerTable(const LayerTable& table) {
  if (table.forward_before_first < 0 || table.backward_before_first < 0) {
    return absl::InvalidArgumentError(
        "the computation before the first layer has a negative time");
  }
  for (size_t l = 0; l < table.layers.size(); ++l) {
    const LayerCosts& c = table.layers[l];
    for (const Nanos time : {c.transfer, c.forward, c.forward_from_host, c.backward,
                             c.backward_from_host, c.forward_after, c.backward_after}) {
      if (time < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("layer %d (%s) has a negative time", l, c.name));
      }
    }
  }
  return absl::OkStatus();
}

ScheduleTimes EvaluateSchedule(const LayerTable& table, absl::Span<const ExecutionMode> modes,
                               bool gradients_share_link) {
  const size_t count = std::min(table.layers.size(), modes.size());
  ScheduleTimes times;
  times.layers.resize(count);

  // Forward: the compute stream beside the link, which loads the GFGB layers
  // back to back from the iteration's start.
  Nanos compute = table.forward_before_first;
  Nanos link = 0;
  for (size_t l = 0; l < count; ++l) {
    const LayerCosts& c = table.layers[l];
    LayerTimes& t = times.layers[l];
    if (modes[l] == ExecutionMode::kGfgb) {
      link += c.transfer;
      t.load_end = link;
      t.forward_start = std::max(compute, link);
      t.forward_stall = t.forward_start - compute;
      t.forward_end = t.forward_start + c.forward;
      times.parameter_bytes += c.parameter_bytes;
    } else {
      t.forward_start = compute;
      t.forward_end = compute + c.forward_from_host;
      if (modes[l] == ExecutionMode::kDfgb) times.parameter_bytes += c.parameter_bytes;
    }
    compute = t.forward_end + c.forward_after;
  }
  times.forward_time = compute;
  times.link_idle_from = link;

  // DFGB copies in the idle window, in forward order, each after its forward.
  for (size_t l = 0; l < count; ++l) {
    if (modes[l] != ExecutionMode::kDfgb) continue;
    LayerTimes& t = times.layers[l];
    t.copy_start = std::max(link, t.forward_end);
    t.copy_end = t.copy_start + table.layers[l].transfer;
    link = t.copy_end;
  }

  // Backward: the layers in reverse, A_{l,l+1}'s backward before layer l's.
  Nanos now = times.forward_time;
  bool gradient_seen = false;
  for (size_t r = count; r-- > 0;) {
    const LayerCosts& c = table.layers[r];
    LayerTimes& t = times.layers[r];
    now += c.backward_after;
    t.backward_start = now;
    if (modes[r] == ExecutionMode::kDfgb) t.backward_start = std::max(now, t.copy_end);
    t.backward_stall = t.backward_start - now;
    t.backward_end =
        t.backward_start + (modes[r] == ExecutionMode::kDha ? c.backward_from_host : c.backward);
    now = t.backward_end;
    if (!gradient_seen) {
      times.first_gradient = now;
      gradient_seen = true;
    }
  }
  now += table.backward_before_first;
  if (!gradient_seen) times.first_gradient = now;
  times.backward_time = now - times.forward_time;
  times.iteration_time = now;

  for (size_t l = 0; l < count; ++l) {
    if (modes[l] != ExecutionMode::kDfgb) continue;
    const LayerTimes& t = times.layers[l];
    if (t.backward_stall > 0 || (gradients_share_link && t.copy_end > times.first_gradient)) {
      ++times.late_copies;
    }
  }
  return times;
}

}  // namespace umlab
