// `zero-offload`: ZeRO-Offload's single-GPU schedule (Ren et al., ATC '21,
// §4.1, Fig. 5), the baseline MemFerry is measured against (Yao et al.,
// Fig. 2(a)), for programs whose optimizer step runs on the CPU (the zoo's
// `offload=true`: one host kernel per parameter, docs/workloads.md):
//   - the forward and backward run on the GPU with every tensor migrated
//     on demand, as `demand` does;
//   - each gradient is written back to the host as soon as the last GPU
//     kernel touching it before the step has ended, overlapping the rest of
//     the backward ("Gradients" in MemFerry's Fig. 2(a));
//   - each parameter is copied back to the device as soon as the CPU has
//     updated it, overlapping the update of the next ("Params").
// What to move when comes from the program graph (core/host_step_schedule.h).
// With `freed_pages=recycle`, freed tensors' pages are dropped and new
// ones populated ahead (core/freed_tensor_pages.h), as on the cudaMalloc
// memory ZeRO-Offload runs on.
// A program without host kernels runs as `demand`.
#ifndef UMLAB_POLICIES_ZERO_OFFLOAD_ZERO_OFFLOAD_H_
#define UMLAB_POLICIES_ZERO_OFFLOAD_ZERO_OFFLOAD_H_

#include <cstddef>
#include <cstdint>

#include "core/freed_tensor_pages.h"
#include "core/host_step_schedule.h"
#include "core/iteration_plans.h"
#include "core/policy.h"

namespace umlab {

class ZeroOffloadPolicy final : public Policy {
 public:
  explicit ZeroOffloadPolicy(bool recycle_freed_pages = false)
      : recycle_freed_pages_(recycle_freed_pages) {}
  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnIterationBegin(uint64_t iteration) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnKernelEnd(uint32_t exec_id) override;
  void OnAllocatorEvent(const Event& event) override;
  void ReportStats(PolicyStats& out) const override;

 private:
  const bool recycle_freed_pages_;
  FreedTensorPages freed_pages_;
  IterationPlans<HostStepSchedule> plans_;
  // The running kernel's place in its iteration's schedule (null: none).
  const HostStepSchedule* schedule_ = nullptr;
  size_t kernel_ = 0;
  uint64_t written_back_tensors_ = 0;
  uint64_t reloaded_tensors_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_ZERO_OFFLOAD_ZERO_OFFLOAD_H_
