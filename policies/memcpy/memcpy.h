// `memcpy`: a program run as written for the GPU's own memory, the baseline
// HUM is measured against (the thesis's "CUDA", §7.1). Its cudaMalloc'd
// buffers are device memory: mapped when they are allocated (populated,
// no bytes moved) and never evicted. Its copies are DMA transfers over the
// link at the copy rate, in stream order, a synchronous one holding the host
// (CopyMode::kDma; docs/hum.md). cudaMalloc fails when the buffers do not
// fit, so the policy refuses a program whose buffers need more frames than
// the capacity.
#ifndef UMLAB_POLICIES_MEMCPY_MEMCPY_H_
#define UMLAB_POLICIES_MEMCPY_MEMCPY_H_

#include <optional>

#include "core/policy.h"

namespace umlab {

class MemcpyPolicy final : public Policy {
 public:
  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnAllocatorEvent(const Event& event) override;
  CopyMode HowToCopy(const CopyCommand& /*copy*/) override { return CopyMode::kDma; }
  // Device memory is not paged: nothing is ever evicted.
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& /*query*/) override {
    return std::nullopt;
  }

 private:
  // The event that hands a buffer out (kActivate, or kAlloc in a program
  // without activations): its pages are populated then.
  EventKind maps_on_ = EventKind::kActivate;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMCPY_MEMCPY_H_
