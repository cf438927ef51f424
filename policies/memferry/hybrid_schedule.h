// MemFerry's hybrid training schedule (Yao et al., "MemFerry: A Fast and
// Memory Efficient Offload Training Framework with Hybrid GPU Computation",
// §IV-B and Fig. 6): what one iteration costs once every layer has an
// execution mode. The planners (memferry_planner.h) decide the modes; this
// file only says what a choice of modes implies, so that a plan's predicted
// times come from one model whoever made the plan.
//
// The model is the paper's:
//  - Forward: one compute stream runs the layers in order. At the start of
//    the iteration the link begins loading every GFGB layer's parameters,
//    back to back in forward order; a GFGB layer starts when its load is done
//    and the layer before it is. DHA and DFGB layers compute on the host copy
//    and wait for nothing. The link and the compute stream run in parallel
//    ("the DHA computation streams and the CPU-GPU data transfer streams ...
//    can be executed in parallel", §III-B), so DHA reads are not charged to
//    the link. umlab's remote reads do share it, and go first: where a
//    layer's costs say how long its remote reads hold the host-to-device
//    lane (LayerCosts::forward_link, backward_link), copies make no progress
//    while they do; nor while GO-MemFerry's gradients are written to the
//    host on a half-duplex link (gradient_link). With those at 0 the model
//    is the paper's.
//  - DFGB copies: "the layer is transmitted to GPU memory after its DHA FP
//    execution" (§IV-B), in the link's idle window, which opens when the last
//    GFGB load is done and closes "at the beginning of gradient transmission
//    back to CPU memory": when the first gradient is ready. Copies go one at
//    a time in forward order, each once its layer's forward is done (the
//    order the policy queues them in, at each layer's last forward kernel).
//  - Backward: the layers in reverse order, each computing with its
//    parameters in device memory (GFGB, DFGB) or on the host (DHA); a DFGB
//    layer whose copy is not done waits for it.
// Times are integer nanoseconds, as everywhere in umlab, so a plan's times
// are exact sums of its inputs.
#ifndef UMLAB_POLICIES_MEMFERRY_HYBRID_SCHEDULE_H_
#define UMLAB_POLICIES_MEMFERRY_HYBRID_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/memory_units.h"

namespace umlab {

// Where a layer's parameters are when it computes (§IV-B).
enum class ExecutionMode : uint8_t {
  kGfgb,  // GPU forward, GPU backward: copied in before the forward
  kDha,   // direct host access in both passes: never copied
  kDfgb,  // DHA forward, then copied in for a GPU backward
};
const char* ExecutionModeName(ExecutionMode mode);  // "GFGB", "DHA", "DFGB"

// The profiled quantities of one layer (§IV-B's notation list), a "layer"
// being one unit of parameters that moves as a whole.
struct LayerCosts {
  std::string name;
  uint64_t parameter_bytes = 0;  // S_l
  Nanos transfer = 0;            // T_trans(l): copy of the parameters to the GPU
  Nanos forward = 0;             // T_FP(l): forward with the parameters in HBM
  Nanos forward_from_host = 0;   // T^H_FP(l): forward reading them from the host
  // Backward with the parameters in HBM. The paper's list names no symbol
  // for it; §IV-D calls it T_CBP ("the normal on-GPU BP time").
  Nanos backward = 0;
  Nanos backward_from_host = 0;  // T^H_BP(l): backward reading them from the host
  // The parameter-free computation between this layer and the next,
  // A_{l,l+1} (activations, attention scores, residual adds): its forward
  // T_FP(A_{l,l+1}) and backward T_BP(A_{l,l+1}) times.
  Nanos forward_after = 0;
  Nanos backward_after = 0;
  // How long the layer's reads from the host hold the host-to-device lane,
  // from the start of its forward (DHA, DFGB) and of its backward (DHA),
  // where they share it with the copies and go first (umlab's link; 0: they
  // do not, as in the paper).
  Nanos forward_link = 0;
  Nanos backward_link = 0;
  // How long the accesses to the layer's gradients, when they are kept in
  // host memory (GO-MemFerry, §IV-D), hold that lane from the start of its
  // backward, whatever its mode: reads of them (an accumulation) and, on a
  // half-duplex link, the writes. 0 when its gradients stay on the device.
  Nanos gradient_link = 0;
};

// The model, in forward order.
struct LayerTable {
  // Parameter-free computation before the first layer (A_{0,1}: the input
  // load, say), which the paper's indexing has no place for. Its forward is
  // time the link can already load in; its backward runs last.
  Nanos forward_before_first = 0;
  Nanos backward_before_first = 0;
  std::vector<LayerCosts> layers;
};

// InvalidArgument naming the first layer with a negative time.
absl::Status ValidateLayerTable(const LayerTable& table);

// When things happen to one layer in the iteration, from its start.
struct LayerTimes {
  Nanos load_end = 0;        // GFGB: its forward load is done (else 0)
  Nanos forward_start = 0;
  Nanos forward_end = 0;
  Nanos forward_stall = 0;   // GFGB: how long the forward waited for the load
  Nanos copy_start = 0;      // DFGB: its copy after the forward (else 0)
  Nanos copy_end = 0;
  Nanos backward_start = 0;
  Nanos backward_end = 0;
  Nanos backward_stall = 0;  // DFGB: how long the backward waited for the copy
};

struct ScheduleTimes {
  std::vector<LayerTimes> layers;
  Nanos forward_time = 0;   // the forward pass, stalls included
  Nanos backward_time = 0;  // from the end of the forward to the end of the backward
  // Forward plus backward: the part of the iteration the modes decide. The
  // gradients' drain to the host and the CPU's update follow the same
  // schedule under every plan (all gradients go to the host), so they are
  // left out.
  Nanos iteration_time = 0;
  // The link's idle window for DFGB copies: it opens when the last GFGB load
  // is done and closes when the first gradient is ready.
  Nanos link_idle_from = 0;
  Nanos first_gradient = 0;
  // DFGB copies that made their backward wait or, when gradients share the
  // link, ran past the window: a plan the DFGB greedy would not make.
  int late_copies = 0;
  // Device memory the plan's parameter buffers take: the GFGB and DFGB
  // layers' parameters (the shadow model's buffers, §IV-C, held for the
  // whole iteration).
  uint64_t parameter_bytes = 0;
};

// The times of `table` run with `modes` (one per layer). With
// `gradients_share_link`, the idle window closes at the first gradient (the
// paper's link, one transfer at a time); without it (a full-duplex link),
// a copy is late only if its backward waits for it.
ScheduleTimes EvaluateSchedule(const LayerTable& table, absl::Span<const ExecutionMode> modes,
                               bool gradients_share_link);

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_HYBRID_SCHEDULE_H_
