#include "policies/memferry/hybrid_schedule.h"

#include <algorithm>
#include <utility>
#include <vector>

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
                             c.backward_from_host, c.forward_after, c.backward_after,
                             c.forward_link, c.backward_link, c.gradient_link}) {
      if (time < 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("layer %d (%s) has a negative time", l, c.name));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The host-to-device lane as the copies see it: stretches where remote reads
// hold it, and copies fill the rest in order.
class CopyLane {
 public:
  void Hold(Nanos from, Nanos length) {
    if (length > 0) held_.emplace_back(from, from + length);
  }
  void Sort() { std::sort(held_.begin(), held_.end()); }
  // When `work` of copying that may start at `start` is done; stretches
  // must be sorted by start (Sort, or held in increasing order).
  Nanos Finish(Nanos start, Nanos work) const {
    Nanos t = start;
    for (const auto& [from, to] : held_) {
      if (to <= t) continue;
      if (from > t) {
        if (from - t >= work) return t + work;
        work -= from - t;
      }
      t = to;
    }
    return t + work;
  }

 private:
  std::vector<std::pair<Nanos, Nanos>> held_;
};

// The backward, layers in reverse with A_{l,l+1}'s backward before layer
// l's, each DFGB layer waiting for its copy (copy_end, set by the caller).
// Returns the end of the backward; sets first_gradient.
Nanos RunBackward(const LayerTable& table, absl::Span<const ExecutionMode> modes,
                  ScheduleTimes& times) {
  Nanos now = times.forward_time;
  bool gradient_seen = false;
  for (size_t r = times.layers.size(); r-- > 0;) {
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
  return now;
}

}  // namespace

ScheduleTimes EvaluateSchedule(const LayerTable& table, absl::Span<const ExecutionMode> modes,
                               bool gradients_share_link) {
  const size_t count = std::min(table.layers.size(), modes.size());
  ScheduleTimes times;
  times.layers.resize(count);

  // Forward: the compute stream beside the link, which loads the GFGB layers
  // back to back from the iteration's start, around the lane time the DHA
  // and DFGB layers' reads take from their forward's start.
  CopyLane forward_lane;
  Nanos compute = table.forward_before_first;
  Nanos link = 0;
  for (size_t l = 0; l < count; ++l) {
    const LayerCosts& c = table.layers[l];
    LayerTimes& t = times.layers[l];
    if (modes[l] == ExecutionMode::kGfgb) {
      link = forward_lane.Finish(link, c.transfer);
      t.load_end = link;
      t.forward_start = std::max(compute, link);
      t.forward_stall = t.forward_start - compute;
      t.forward_end = t.forward_start + c.forward;
      times.parameter_bytes += c.parameter_bytes;
    } else {
      t.forward_start = compute;
      t.forward_end = compute + c.forward_from_host;
      forward_lane.Hold(t.forward_start, c.forward_link);
      if (modes[l] == ExecutionMode::kDfgb) times.parameter_bytes += c.parameter_bytes;
    }
    compute = t.forward_end + c.forward_after;
  }
  times.forward_time = compute;
  times.link_idle_from = link;

  // DFGB copies in the idle window, in forward order, each after its
  // forward, around the reads of the forward and of the DHA layers'
  // backward. Those depend on when the copies land, so the two are settled
  // together: a few rounds, each placing the reads where the last left the
  // backward.
  Nanos end = RunBackward(table, modes.first(count), times);
  for (int round = 0; round < 4; ++round) {
    CopyLane lane = forward_lane;
    for (size_t l = 0; l < count; ++l) {
      const LayerCosts& c = table.layers[l];
      const Nanos reads = modes[l] == ExecutionMode::kDha ? c.backward_link : 0;
      lane.Hold(times.layers[l].backward_start, reads + c.gradient_link);
    }
    lane.Sort();
    bool moved = false;
    Nanos copies = link;
    for (size_t l = 0; l < count; ++l) {
      if (modes[l] != ExecutionMode::kDfgb) continue;
      LayerTimes& t = times.layers[l];
      const Nanos start = std::max(copies, t.forward_end);
      const Nanos copy_end = lane.Finish(start, table.layers[l].transfer);
      moved |= round == 0 || copy_end != t.copy_end;
      t.copy_start = start;
      t.copy_end = copy_end;
      copies = copy_end;
    }
    if (!moved) break;
    end = RunBackward(table, modes.first(count), times);
  }
  times.backward_time = end - times.forward_time;
  times.iteration_time = end;

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
