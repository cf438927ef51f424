#include "policies/hum/hum.h"

#include <algorithm>
#include <memory>

#include "policies/uvm_default/uvm_default.h"

namespace umlab {

bool HumPolicy::StartsCopy(CopyId /*copy*/, absl::Span<const CopyId> earlier) {
  // Scheduled, every copy starts at once and they share the migration
  // thread; unscheduled, the driver's migration function is synchronous
  // and a copy waits for the one before it (§4.6).
  return sched_ || earlier.empty();
}

CopyId HumPolicy::NextCopyToMigrate(absl::Span<const CopyId> waiting) {
  if (!sched_) return waiting.front();
  // Round-robin over the queues: the first after the one served last.
  const auto* next = last_served_.has_value()
                         ? std::upper_bound(waiting.begin(), waiting.end(), *last_served_)
                         : waiting.begin();
  if (next == waiting.end()) next = waiting.begin();
  if (last_served_.has_value() && *next != *last_served_) ++queue_switches_;
  last_served_ = *next;
  return *next;
}

bool HumPolicy::LaunchesEarly(const EarlyLaunchQuery& query) {
  return query.kernel_touches_copy;
}

PageMask HumPolicy::ExpandFault(BlockNumber block, const PageMask& faulted) {
  // The driver's defaults (uvm-default's: 51%, 64 KB big pages); nothing
  // thrashes here, where every buffer fits on the device.
  constexpr int kThresholdPercent = 51;
  constexpr int kBigPagePages = 16;
  const BlockState* state = context().memory().Find(block);
  const PageMask present = state == nullptr ? PageMask() : state->resident | state->in_flight;
  return TreePrefetch(faulted, present, PageMask(), kThresholdPercent, kBigPagePages);
}

void HumPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("queue_switches", queue_switches_);
}

UMLAB_REGISTER_POLICY(
    hum,
    {"hum",
     "HUM (hidden unified memory): host-to-device copies return at once, staged by host "
     "threads and migrated 2 MB at a time round-robin over the copies by one thread, kernels "
     "launched early on them, sources write-protected until their copies land",
     {{"threads", ParamType::kInt, "8",
       "host threads staging copies in managed memory (the thesis's best, Fig. 7.3)",
       ParamRange::Closed(1, 64)},
      {"sched", ParamType::kBool, "true",
       "schedule copies (§4.7): all start at once and share the migration thread "
       "round-robin; false is the thesis's HUM-no-sched (each waits for the one before)"}},
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<HumPolicy>(static_cast<int>(params.Int("threads")),
                                          params.Bool("sched"));
     }});

}  // namespace umlab
