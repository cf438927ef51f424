// MAPA's affine access patterns (DeepUM thesis §6.5.1): a kernel's memory
// operation whose element index is an affine function of the block and
// thread indices and of the induction variables of the loops around it,
//
//   f = c + a_1 x_1 + ... + a_k x_k,   0 <= x_i < N_i,
//
// where N_i is the grid's or the thread block's size along that axis, or a
// loop's trip count. SnuRHAC prefetches from these (its static prefetching)
// and checks its devices' write ranges with them (its single-device rule).
//
// Two questions are asked of an index for a box of thread blocks: which
// elements its threads really touch (what a device running the box
// accesses), and which elements SnuRHAC's runtime expects them to touch.
// The runtime does not enumerate threads: per thread block it evaluates
// the index at representative threads, the corners of the block, with the
// loops at their bounds, and takes the lowest and highest address as the
// block's range. Those ranges are a hull of the truth: a block that reads
// one column of a row-major matrix gets every row in between.
#ifndef UMLAB_CORE_AFFINE_INDEX_H_
#define UMLAB_CORE_AFFINE_INDEX_H_

#include <cstdint>
#include <vector>

#include "core/thread_grid.h"

namespace umlab {

enum class IndexVariable : uint8_t {
  kBlockX,  // blockIdx.x, over the grid
  kBlockY,
  kBlockZ,
  kThreadX,  // threadIdx.x, over the thread block
  kThreadY,
  kThreadZ,
  kLoop,  // a loop's induction variable, over its trip count
};

struct AffineTerm {
  IndexVariable variable = IndexVariable::kThreadX;
  int64_t coefficient = 0;
  // kLoop: the loop's trip count (its N_i). The grid and the thread block
  // give the other variables' ranges.
  uint64_t trips = 0;
};

// f = constant + the sum of the terms, in elements of the array accessed.
struct AffineIndex {
  int64_t constant = 0;
  std::vector<AffineTerm> terms;
};

// Elements [begin, end) of an array; may reach outside the array (a
// stencil's halo at the edge), which its user clips.
struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const ElementRange&) const = default;
};

// The elements the threads of `blocks` (blocks of `threads` threads each)
// touch over every iteration: the exact union, merged, in order. Unions
// that would need more than a million ranges are rounded out to whole
// runs of `elements_per_page` elements first (a page's worth: what the
// memory system moves), so they may name a few elements more than touched.
std::vector<ElementRange> TouchedElements(const AffineIndex& index, const GridShare& blocks,
                                          const Dim3& threads, int64_t elements_per_page);

// SnuRHAC's estimate of the same (§6.5.1): the union over the blocks of
// `blocks` of each block's range between its lowest and highest element
// at the representative threads and the loops' bounds. Merged, in order.
std::vector<ElementRange> RepresentativeElements(const AffineIndex& index, const GridShare& blocks,
                                                 const Dim3& threads, int64_t elements_per_page);

}  // namespace umlab

#endif  // UMLAB_CORE_AFFINE_INDEX_H_
