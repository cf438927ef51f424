// GO-MemFerry at run time (Yao et al., §IV-D): the parameter gradients the
// plan sends to host memory are written there by the backward, through a
// remote mapping (PolicyContext::MapRemote, the paper's DHA write), and
// never take a frame.
//
// A gradient's pages are mapped when the allocator activates it, before
// the kernel that first writes it. MapRemote can only map pages that are not
// on the device, and the caching allocator hands a gradient memory that
// held other tensors moments before (activations in the forward, activation
// gradients in the backward), whose pages are still resident. So the pages
// are cleared first: from the end of the last kernel that touches any
// earlier occupant of the gradient's pages (in the planned iteration), until
// the gradient is activated, whatever the allocator frees of them is
// dropped from the device without a write-back (PolicyContext::Discard: its
// bytes are dead). The occupants between then and now, if any, are tensors
// no kernel touches. When the allocator deactivates the gradient (PyTorch's
// zero_grad, after the step has read it), its pages are unmapped and the
// host's copy forgotten the same way; when the allocator next hands one of
// them to a tensor (the next forward's activations), it is populated on the
// device, zero-filled and with no copy (PolicyContext::Populate), before
// the kernel that uses it. So the offload takes device memory from the
// gradients only, and the forward finds its memory on the device as it
// would without the offload, rather than faulting each page back in.
//
// Only the pages a gradient covers entirely move: a page it shares with
// another tensor (the allocator packs small tensors) stays where that one
// needs it. A page still on the device when its gradient is activated (an
// earlier occupant the plan did not foresee) is written there, and counted.
// A fault on a mapped gradient page (one found on the device and evicted
// since) is answered with a mapping. All of this applies to iterations
// shaped like the planned one; in others the gradients are paged on demand.
#ifndef UMLAB_POLICIES_MEMFERRY_HOST_GRADIENTS_H_
#define UMLAB_POLICIES_MEMFERRY_HOST_GRADIENTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/event.h"
#include "core/policy.h"
#include "core/program_graph.h"
#include "policies/memferry/layer_table_builder.h"
#include "policies/memferry/page_set.h"

namespace umlab {

class HostGradients {
 public:
  // The gradients of the layers whose `on_host` is true (parallel to
  // `layers`), in `planned`, the iteration the plan was made for.
  void Place(const IterationGraph& planned, const std::vector<LayerGradients>& layers,
             const std::vector<bool>& on_host);

  // The policy's hooks, carried out through its context. `acting`: the
  // iteration runs the planned kernels; `kernel`: the index in it of the
  // kernel that ended.
  void OnIterationBegin(PolicyContext& context, bool acting);
  void OnKernelEnd(PolicyContext& context, size_t kernel);
  void OnAllocatorEvent(PolicyContext& context, const Event& event, bool acting);
  // The faulted pages that belong to a gradient mapped now.
  PageMask MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) const;

  uint64_t bytes_planned() const { return bytes_planned_; }
  // Gradients mapped when activated, over the run.
  uint64_t gradients_mapped() const { return gradients_mapped_; }
  // Bytes of those gradients found on the device when they were activated,
  // and so written there.
  uint64_t bytes_found_on_device() const { return bytes_found_on_device_; }

 private:
  struct Gradient {
    uint64_t address = 0;
    uint64_t size = 0;
    PageSet pages;  // the pages it covers entirely
  };
  // From now until it is activated, the gradient's pages are dropped
  // whenever they are free.
  void StartClearing(PolicyContext& context, size_t gradient);
  static void Discard(PolicyContext& context, const PageSet& pages);

  std::vector<Gradient> gradients_;
  uint64_t bytes_planned_ = 0;
  // When each gradient's clearing starts: at the end of a kernel, or at the
  // iteration's start (no earlier occupant in the iteration).
  absl::flat_hash_map<size_t, std::vector<size_t>> clear_after_kernel_;
  std::vector<size_t> clear_from_start_;

  // The iteration under way: gradients awaiting activation, by address, and
  // their pages; gradients mapped, by address, and their pages.
  absl::flat_hash_map<uint64_t, size_t> awaiting_;
  PageSet clearing_;
  absl::flat_hash_map<uint64_t, size_t> mapped_;
  PageSet mapped_pages_;
  // Pages of gradients freed since, to populate when a tensor is activated
  // over them.
  PageSet freed_;

  uint64_t gradients_mapped_ = 0;
  uint64_t bytes_found_on_device_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_HOST_GRADIENTS_H_
