// GO-MemFerry's gradient plan at run time (Yao et al., §IV-D): the
// parameter gradients the plan sends to host memory are written there by
// the backward, through a remote mapping (PolicyContext::MapRemote, the
// paper's DHA write), and never take a frame; the others are paged on
// demand, and how much of all of them the device holds is measured.
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
// A gradient is recognised at its activation by its address and size, from
// the same kernel on (an earlier tensor at its address is one of those
// occupants). Only the pages a gradient covers entirely move: a page it
// shares with another tensor (the allocator packs small tensors) stays
// where that one needs it. A page still on the device when its gradient is
// activated (an earlier occupant the plan did not foresee) is written
// there, and counted. A fault on a mapped gradient page (one found on the
// device and evicted since) is answered with a mapping. All of this applies
// to iterations shaped like the planned one; in others the gradients are
// paged on demand.
#ifndef UMLAB_POLICIES_MEMFERRY_GRADIENT_PLACEMENT_H_
#define UMLAB_POLICIES_MEMFERRY_GRADIENT_PLACEMENT_H_

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

class GradientPlacement {
 public:
  // The gradients of `layers` in `planned`, the iteration the plan was made
  // for; those of the layers whose `on_host` is true go to host memory.
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

  // Over the run: gradients mapped when activated; bytes of those found on
  // the device then, and so written there; and the most bytes of live
  // parameter gradients (pages they cover entirely) the device held, or had
  // on their way, at a kernel's end.
  uint64_t gradients_mapped() const { return gradients_mapped_; }
  uint64_t bytes_found_on_device() const { return bytes_found_on_device_; }
  uint64_t peak_bytes_on_device() const { return peak_bytes_on_device_; }

 private:
  struct Gradient {
    uint64_t address = 0;
    uint64_t size = 0;
    PageSet pages;  // the pages it covers entirely
    bool on_host = false;
  };
  // From the end of its earlier occupants' last kernel until it is
  // activated; a gradient on the host has its pages dropped whenever they
  // are free.
  void Await(PolicyContext& context, size_t gradient);
  void Activate(PolicyContext& context, size_t gradient, bool acting);
  void Deactivate(PolicyContext& context, size_t gradient);
  uint64_t BytesOnDevice(const PolicyContext& context) const;
  static void Discard(PolicyContext& context, const PageSet& pages);

  std::vector<Gradient> gradients_;
  // When each gradient starts to be awaited: at the end of a kernel, or at
  // the iteration's start (no earlier occupant in the iteration).
  absl::flat_hash_map<size_t, std::vector<size_t>> await_after_kernel_;
  std::vector<size_t> await_from_start_;

  // Gradients awaiting activation in the iteration under way, and the pages
  // of those bound for the host.
  absl::flat_hash_map<uint64_t, size_t> awaiting_;  // by address
  PageSet clearing_;
  // Gradients live (activated, not yet deactivated), and the pages of those
  // mapped to the host.
  absl::flat_hash_map<uint64_t, size_t> live_;  // by address
  PageSet mapped_;
  // Pages of host gradients freed since, to populate when a tensor is
  // activated over them.
  PageSet freed_;

  uint64_t gradients_mapped_ = 0;
  uint64_t bytes_found_on_device_ = 0;
  uint64_t peak_bytes_on_device_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_GRADIENT_PLACEMENT_H_
