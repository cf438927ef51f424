// A program read ahead of its run, for the policies that plan over it
// (Policy::PlansAhead: G10's planner). Per iteration: the kernels in order,
// with their compute time and the tensors each reads and writes, and the
// tensors themselves.
//
// A tensor is a range the allocator hands out (kActivate to kDeactivate).
// A program without activations (a plain trace, an HPC kernel) has its
// reserved segments (kAlloc to kFree) as tensors instead. Copies between
// host and device buffers (kCopy) are not kernels and are left out: how
// they run is the policy's choice (Policy::HowToCopy). Each iteration
// lists every tensor that is active at some point in it, so a plan made for
// one iteration needs nothing from another.
#ifndef UMLAB_CORE_PROGRAM_GRAPH_H_
#define UMLAB_CORE_PROGRAM_GRAPH_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/event_source.h"
#include "core/event.h"
#include "core/memory_units.h"
#include "core/tensor_role.h"

namespace umlab {

struct GraphTensor {
  uint64_t address = 0;
  uint64_t size = 0;
  // G10's "global" tensors (weights, optimizer state), whose data outlives
  // the iteration: still active when it ends, or active when it began and
  // ended only after its last kernel began (the program's teardown). The
  // others are intermediates: the allocator takes them back within the
  // iteration, and their bytes are garbage from then on.
  bool global = false;
  // What the program says the tensor is (its kActivate's role), if it says.
  std::optional<TensorRole> role;

  bool operator==(const GraphTensor&) const = default;
};

// How much of one tensor a kernel touches: the bytes its accesses move,
// every pass over them counted (Event::rereads: a GEMM's weight), and the
// pages they visit (an access spanning three pages visits three; two
// accesses to one page visit it twice), which is how the backends pace a
// kernel and charge an access through a remote mapping. An embedding's
// gather touches a few rows of its table, not the table.
struct TensorTouch {
  uint64_t bytes = 0;
  uint64_t page_visits = 0;

  bool operator==(const TensorTouch&) const = default;
};

struct GraphKernel {
  uint32_t exec_id = 0;
  Nanos duration_ns = 0;  // compute time (CPU time for a host kernel)
  // Tensor indices into IterationGraph::tensors, ascending and distinct. An
  // atomic access counts as both.
  std::vector<uint32_t> reads;
  std::vector<uint32_t> writes;
  // Of those, the tensors it passes over more than once (an access with
  // rereads: a GEMM's weight), ascending and distinct.
  std::vector<uint32_t> reread;
  // What it reads and writes of each of those tensors, parallel to `reads`
  // and `writes`.
  std::vector<TensorTouch> read_touches;
  std::vector<TensorTouch> write_touches;
  // The pages all its accesses visit, in tensors or not: the accesses its
  // issuers share (core/access_pace.h).
  uint64_t page_visits = 0;
  // A host kernel (KernelPlace::kHost): CPU work whose accesses take pages
  // off the device rather than onto it.
  bool on_host = false;

  bool operator==(const GraphKernel&) const = default;
  // The same kernel with the same tensors, whatever it touches of them: an
  // embedding's gather draws other rows each iteration.
  bool SameUses(const GraphKernel& other) const {
    return exec_id == other.exec_id && duration_ns == other.duration_ns &&
           reads == other.reads && writes == other.writes;
  }
};

struct IterationGraph {
  uint64_t index = 0;
  // Those active when the iteration begins, by address, then those it
  // activates, in order.
  std::vector<GraphTensor> tensors;
  std::vector<GraphKernel> kernels;
  // Bytes accessed outside any active tensor: a plan cannot see them.
  uint64_t untracked_access_bytes = 0;

  // The same kernels touching the same tensors: one plan serves both.
  bool SameShape(const IterationGraph& other) const {
    return tensors == other.tensors &&
           std::equal(kernels.begin(), kernels.end(), other.kernels.begin(), other.kernels.end(),
                      [](const GraphKernel& a, const GraphKernel& b) { return a.SameUses(b); });
  }
};

struct ProgramGraph {
  // Kernels before the first iteration marker (or in a program without
  // markers) form an iteration of their own, index 0.
  std::vector<IterationGraph> iterations;
  // The event that opens a tensor: kActivate, or kAlloc in a program
  // without activations (whose tensors are its segments).
  EventKind tensors_open_with = EventKind::kActivate;
  // What kKernelDefine calls each execution id (empty for programs that
  // define none).
  absl::flat_hash_map<uint32_t, std::string> kernel_names;
};

// Reads `program` to its end. Fails with the source's error.
absl::StatusOr<ProgramGraph> ReadProgramGraph(EventSource& program);

}  // namespace umlab

#endif  // UMLAB_CORE_PROGRAM_GRAPH_H_
