// A policy building block: the allocator's freed bytes cost nothing to
// move, as they cost nothing on the cudaMalloc memory that ZeRO-Offload and
// MemFerry train on. Under unified memory a tensor's pages keep whatever
// copy they had after the allocator frees it: a page written back to the
// host (a gradient the CPU's step read) is copied back in when the
// allocator hands it to the next tensor, and a page with no data faults on
// its first touch. A policy that models a system built on device memory
// calls this on every allocator event:
//   - at a deactivation, the whole pages of the freed range that are not on
//     the device lose their host copy (PolicyContext::Discard): their bytes
//     are dead; pages still on the device stay, for the next tensor;
//   - at an activation, the whole pages of the new tensor that hold no data
//     are populated on the device ahead of its first kernel, with no copy
//     (PolicyContext::Populate), as a cudaMalloc'd buffer is simply there.
// Pages a tensor shares with a neighbour are left alone. Policies that offer
// it take the `freed_pages` parameter (FreedPagesParam): `keep`, unified
// memory's behaviour and the default, or `recycle`.
#ifndef UMLAB_CORE_FREED_TENSOR_PAGES_H_
#define UMLAB_CORE_FREED_TENSOR_PAGES_H_

#include <cstdint>

#include "core/block_range.h"
#include "core/event.h"
#include "core/param_map.h"
#include "core/policy.h"

namespace umlab {

// The `freed_pages` parameter, and whether a resolved map says recycle.
inline ParamInfo FreedPagesParam() {
  return {"freed_pages", ParamType::kString, "keep",
          "keep (unified memory: a freed tensor's pages keep their copy, so a page written back "
          "is copied in again for the next tensor) or recycle (as on cudaMalloc memory: freed "
          "pages off the device are dropped and a new tensor's empty pages populated ahead)",
          {},
          {"keep", "recycle"}};
}
inline bool RecyclesFreedPages(const ParamMap& params) {
  return params.Choice("freed_pages") == 1;
}

class FreedTensorPages {
 public:
  void OnAllocatorEvent(PolicyContext& context, const Event& event) {
    if (event.kind == EventKind::kDeactivate) {
      ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/true,
                        [&](BlockNumber block, const PageMask& pages) {
                          const BlockState* state = context.memory().Find(block);
                          if (state == nullptr) return;
                          const PageMask off_device = pages & ~state->resident & ~state->in_flight &
                                                      ~state->invalid & ~state->remote;
                          if (off_device.none()) return;
                          discarded_bytes_ += MaskBytes(off_device);
                          context.Discard(block, off_device);
                        });
    } else if (event.kind == EventKind::kActivate) {
      ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/true,
                        [&](BlockNumber block, const PageMask& pages) {
                          const BlockState* state = context.memory().Find(block);
                          const PageMask empty = state == nullptr ? pages : pages & state->invalid;
                          if (empty.none()) return;
                          populated_bytes_ += MaskBytes(empty);
                          context.Populate(block, empty);
                        });
    }
  }

  // Host copies of freed pages dropped, and pages populated ahead.
  uint64_t discarded_bytes() const { return discarded_bytes_; }
  uint64_t populated_bytes() const { return populated_bytes_; }

 private:
  uint64_t discarded_bytes_ = 0;
  uint64_t populated_bytes_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_FREED_TENSOR_PAGES_H_
