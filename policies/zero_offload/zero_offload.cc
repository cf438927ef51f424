#include "policies/zero_offload/zero_offload.h"

#include <memory>
#include <tuple>

namespace umlab {

absl::Status ZeroOffloadPolicy::Plan(const PlanInput& input) {
  plans_.Build(input.program, ScheduleHostStep);
  return absl::OkStatus();
}

void ZeroOffloadPolicy::OnIterationBegin(uint64_t iteration) {
  plans_.BeginIteration(iteration);
}

void ZeroOffloadPolicy::OnKernelBegin(uint32_t /*exec_id*/) {
  std::tie(schedule_, kernel_) = plans_.NextKernel();
}

void ZeroOffloadPolicy::OnKernelEnd(uint32_t /*exec_id*/) {
  if (schedule_ == nullptr) return;
  for (const TensorMove& move : schedule_->write_back_after[kernel_]) {
    for (const auto& [block, pages] : move.pages) {
      context().PreEvictPages(block, pages, MemoryTier::kHost);
    }
    ++written_back_tensors_;
  }
  for (const TensorMove& move : schedule_->reload_after[kernel_]) {
    for (const auto& [block, pages] : move.pages) {
      context().Prefetch(block, pages, move.reader_exec_id);
    }
    ++reloaded_tensors_;
  }
}

void ZeroOffloadPolicy::OnAllocatorEvent(const Event& event) {
  if (recycle_freed_pages_) freed_pages_.OnAllocatorEvent(context(), event);
}

void ZeroOffloadPolicy::ReportStats(PolicyStats& out) const {
  const HostStepSchedule* last = plans_.last();
  out.AddCount("planned_write_back_bytes", last == nullptr ? 0 : last->write_back_bytes);
  out.AddCount("planned_reload_bytes", last == nullptr ? 0 : last->reload_bytes);
  out.AddCount("tensors_written_back", written_back_tensors_);
  out.AddCount("tensors_reloaded", reloaded_tensors_);
  out.AddCount("kernels_off_plan", plans_.unplanned_kernels());
  out.AddCount("freed_bytes_discarded", freed_pages_.discarded_bytes());
  out.AddCount("freed_bytes_populated", freed_pages_.populated_bytes());
}

UMLAB_REGISTER_POLICY(
    zero_offload,
    {"zero-offload",
     "ZeRO-Offload's schedule for programs whose optimizer step runs on the CPU "
     "(offload=true): gradients written back as the backward produces them, parameters copied "
     "back as the CPU updates them, everything else on demand",
     {FreedPagesParam()},
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<ZeroOffloadPolicy>(RecyclesFreedPages(params));
     }});

}  // namespace umlab
