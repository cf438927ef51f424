// A program as SnuRHAC sees it (DeepUM thesis §6.2, §6.5): arrays in the
// unified address space and kernels launched in order, each with its grid,
// its thread blocks' size, its compute time and, per memory operation,
// which thread block touches which bytes.
//
// The event stream of core/event.h says what a kernel touches as a whole
// and in what order; that is all a single device needs. Splitting a kernel
// over devices needs more: which part of the grid touches which part of an
// array. A grid program carries that as each access's description, two
// views of it:
//  - the truth: for any box of thread blocks (a device's share), the bytes
//    its threads touch. The device runs those.
//  - MAPA's view (§6.5.1): the affine index when the static analyser can
//    find one (the affine and constant categories), nothing when it cannot
//    (indirect or data-dependent indices: tpacf's and lavaMD's). SnuRHAC's
//    static prefetching and its write-overlap check use only this view.
// An affine access's truth follows from its index (core/affine_index.h)
// unless the access says otherwise; an access MAPA cannot analyse carries
// its truth as a function.
//
// Grid programs are built by generators in workloads/snurhac/ and run by
// the cluster sim (emu/snurhac/cluster_sim.h) and the uffd cluster
// (backends/emu/uffd_cluster.h), with no trace format of their own: the
// single-device backends do not run them (docs/snurhac.md says why).
#ifndef UMLAB_CORE_GRID_PROGRAM_H_
#define UMLAB_CORE_GRID_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/affine_index.h"
#include "core/byte_range.h"
#include "core/event.h"
#include "core/memory_units.h"
#include "core/page_mask.h"
#include "core/thread_grid.h"

namespace umlab {

// A memory object the program allocates (cudaMalloc, which SnuRHAC turns
// into managed memory on every node, §6.1).
struct GridArray {
  std::string name;
  uint64_t address = 0;  // 2 MB aligned: UM blocks never span two arrays
  uint64_t bytes = 0;
  // Copied from host memory before the first kernel (cudaMemcpy host to
  // device; under SnuRHAC a host memcpy into the host's UM space, §6.1).
  bool copied_in = false;
  // Copied back to host memory after the last kernel.
  bool copied_out = false;

  ByteRange range() const { return {address, address + bytes}; }
};

// The bytes a box of thread blocks touches, for an access MAPA cannot
// analyse: the program's own knowledge (the neighbour lists of lavaMD, the
// point sets of tpacf's blocks).
using TouchedFunction = std::function<std::vector<ByteRange>(const GridShare& blocks)>;

// One memory operation of a kernel, on one array.
struct GridAccess {
  int array = 0;
  AccessType access = AccessType::kRead;
  uint32_t element_bytes = 4;
  // MAPA's affine index, when it can find one.
  std::optional<AffineIndex> affine;
  // What the threads really touch, when the affine index does not say it:
  // always for an access MAPA cannot analyse, and for one whose threads
  // are filtered by a condition MAPA's representative threads ignore
  // (hotspot's store, made only by a tile's inner threads).
  TouchedFunction touched;
};

struct GridKernel {
  std::string name;
  // Distinct per kernel and arguments (core/event.h's execution id).
  uint32_t exec_id = 0;
  Dim3 grid;
  Dim3 threads;  // per thread block
  // Compute time of the whole grid on one device with its data resident;
  // a share of the grid takes its share of it.
  Nanos compute_ns = 0;
  std::vector<GridAccess> accesses;

  // Atomics on global memory send a kernel to one device (§6.4).
  bool uses_atomics() const;
};

struct GridProgram {
  std::string name;
  std::vector<GridArray> arrays;
  std::vector<GridKernel> launches;  // in launch order

  // Bytes of every array, rounded up to whole blocks as they are placed.
  uint64_t footprint_bytes() const;
  // Structural checks: arrays aligned and apart, accesses in range, every
  // access with a truth, execution ids consistent with names.
  absl::Status Validate() const;
};

// The bytes that `blocks` of `kernel` touch through `access`, within its
// array: merged, in address order.
std::vector<ByteRange> TouchedBytes(const GridProgram& program, const GridKernel& kernel,
                                    const GridAccess& access, const GridShare& blocks);

// What SnuRHAC's runtime expects them to touch (RepresentativeElements),
// within the array; nullopt when MAPA cannot analyse the access.
std::optional<std::vector<ByteRange>> EstimatedBytes(const GridProgram& program,
                                                     const GridKernel& kernel,
                                                     const GridAccess& access,
                                                     const GridShare& blocks);

// The pages of `block` that `array` covers.
PageMask PagesOfArray(const GridArray& array, BlockNumber block);
// The pages of `block` that any of the program's arrays covers.
PageMask PagesOfArrays(const GridProgram& program, BlockNumber block);

// Lays arrays out one after another from address 0, each 2 MB aligned,
// and returns their indices in `program.arrays`; the builder helper every
// generator uses.
class GridArrayLayout {
 public:
  explicit GridArrayLayout(GridProgram& program) : program_(program) {}
  int Add(std::string name, uint64_t bytes, bool copied_in, bool copied_out);

 private:
  GridProgram& program_;
  uint64_t next_address_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_GRID_PROGRAM_H_
