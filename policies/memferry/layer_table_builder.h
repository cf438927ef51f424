// umlab's program read as MemFerry's model (hybrid_schedule.h): the one place
// that knows how a training iteration looks in a ProgramGraph and turns it
// into the planner's per-layer table, with every time taken from umlab's
// own cost model (the kernels' compute times, the device's link and remote
// rates), and into the kernel positions the policy acts at.
//
// From one iteration's graph:
//  - Passes. The forward is the kernels before the first one that writes a
//    gradient (the loss's backward seed); the backward runs from there to
//    the first kernel that writes a parameter or touches optimizer state
//    (the optimizer's step), or to the end.
//  - Layers. A layer is the parameters that move together: those one
//    forward kernel touches are one layer (a Linear's weight and bias, a
//    LayerNorm's), and so are those of forward kernels named after one
//    layer (`<layer>.<op>`: a convolution whose bias is added by a kernel
//    of its own), transitively, so a tied weight (GPT-2's lm_head reading
//    the token embedding) makes its two uses one layer. Layers are in the
//    order of their first forward kernel, which is where the model places
//    them; a tied layer's later use counts in its own forward time.
//  - Kernels. A kernel belongs to the layer whose parameters it touches;
//    otherwise, when the program names its kernels `<layer>.<op>` (the zoo's
//    generators do), to the layer whose forward kernels' name prefix is the
//    longest that its name starts with (a wgrad writes the gradient without
//    reading the weight; cuDNN's convolution computes on a copy of the
//    weight in another layout). Every other kernel is parameter-free
//    computation between layers (LayerCosts::forward_after, backward_after).
//
// The times (LayerCosts) of a kernel k, each with the device's launch gap
// and grid start-up:
//  - with its layer's parameters in device memory: its compute time;
//  - reading them through a remote mapping (MapRemote), the sim's model of
//    it (backends/emu/sim_backend.cc AccessRemotely): the kernel's issuers
//    (I of them) share its N page visits from one cursor in program order,
//    each computing a step s = compute / ceil(N / I) after a visit, and a
//    remote visit holds its issuer until its bytes have crossed the link
//    (at the remote rate, one visit after another) and the round trip L_r
//    is over. A tensor's accesses are one stretch of the cursor. A remote
//    stretch of V >= I visits and B bytes soon has every issuer waiting in
//    it, so it runs on its own: it replaces the V * s / I it would take on
//    the device with the longest of that, the link's time for it
//    (B / rate + L_r) and the issuers' (V * max(s, B / V / rate + L_r) / I).
//    A shorter stretch holds V issuers, the j-th for j visits' bytes and
//    L_r, while the others take the rest of the cursor: it adds what those
//    waits exceed s by, spread over the I issuers. No kernel ends before
//    its longest stretch's bytes have crossed. Reads and writes are
//    stretches of their own.
//  - a copy of its parameters to the device: per 2 MB block its pages
//    touch (the engine's transfers), the link's latency plus the bytes at
//    the host-to-device rate;
//  - the lane its remote reads hold (LayerCosts::forward_link,
//    backward_link): their bytes at the remote read rate, and on a
//    half-duplex link its remote writes' too. The sim's remote accesses
//    share the lanes with migrations and go first, so copies wait for them.
// And the same backward times and lane with the layer's parameter
// gradients remote as well (LayerGradients), for GO-MemFerry.
#ifndef UMLAB_POLICIES_MEMFERRY_LAYER_TABLE_BUILDER_H_
#define UMLAB_POLICIES_MEMFERRY_LAYER_TABLE_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/device_config.h"
#include "core/memory_units.h"
#include "core/program_graph.h"
#include "policies/memferry/hybrid_schedule.h"

namespace umlab {

// Where one layer is in the iteration, by kernel index.
struct LayerKernels {
  std::vector<uint32_t> parameters;  // its tensors, indices into IterationGraph::tensors
  size_t first_forward = 0;
  // The last kernel of the run of its forward kernels at its place: where
  // the model ends its forward and a DFGB copy may start.
  size_t forward_end = 0;
  // Its backward kernels, first and last; both kNoKernel without any.
  size_t first_backward = 0;
  size_t last_backward = 0;
};
inline constexpr size_t kNoKernel = static_cast<size_t>(-1);

// A layer's parameter gradients, for GO-MemFerry (§IV-D): the gradient
// tensors the optimizer's step reads that the layer's backward kernels
// write first, or, written by a kernel no layer claims, that a step kernel
// updating only this layer's parameters reads. The step is what tells a
// parameter's gradient (kept for the update) from an activation's (freed
// within the backward), so an iteration without a step names none. Its
// times are LayerCosts' of the same name with these tensors reached through
// a remote mapping: the backward writing its gradients to host memory by
// DHA, T_GBP, where LayerCosts has T_CBP.
struct LayerGradients {
  std::vector<uint32_t> tensors;  // ascending indices into IterationGraph::tensors
  // The pages they cover entirely: what keeping them in host memory frees.
  // A page they share with another tensor stays where that one needs it.
  uint64_t bytes = 0;
  Nanos backward = 0;
  Nanos backward_from_host = 0;
  // How long their accesses hold the host-to-device lane from the
  // backward's start (LayerCosts::gradient_link when they are remote).
  Nanos link = 0;
};

struct ProgramLayers {
  LayerTable table;
  std::vector<LayerKernels> layers;  // parallel to table.layers
  std::vector<LayerGradients> gradients;  // parallel to table.layers
  size_t backward_begin = 0;  // the first backward kernel (kernels.size(): none)
  size_t step_begin = 0;      // the first kernel of the optimizer's step (kernels.size(): none)
  // Some GPU kernel of the iteration touches optimizer state: the step runs
  // on the device.
  bool optimizer_on_device = false;
};

// FailedPrecondition when the iteration names no parameters (a program
// without tensor roles) or no kernel reads one in its forward.
absl::StatusOr<ProgramLayers> BuildLayerTable(
    const IterationGraph& iteration, const absl::flat_hash_map<uint32_t, std::string>& names,
    const DeviceConfig& device);

// One kernel's time with the parameters in `remote` (sorted tensor indices)
// reached through a remote mapping, by the model above; `remote` empty: its
// compute time. Both with the device's per-kernel overheads.
Nanos KernelTimeWithRemote(const GraphKernel& kernel, const std::vector<uint32_t>& remote,
                           const DeviceConfig& device);

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_LAYER_TABLE_BUILDER_H_
