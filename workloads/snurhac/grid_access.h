// What the grid programs of SnuRHAC's benchmarks (DeepUM thesis Table
// 7.10) are built from: affine terms as the CUDA sources index their
// arrays, the two kinds of access, and the size parameter they share.
#ifndef UMLAB_WORKLOADS_SNURHAC_GRID_ACCESS_H_
#define UMLAB_WORKLOADS_SNURHAC_GRID_ACCESS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/grid_program.h"
#include "core/param_map.h"

namespace umlab::grid {

inline AffineTerm BlockX(int64_t coefficient) { return {IndexVariable::kBlockX, coefficient, 0}; }
inline AffineTerm BlockY(int64_t coefficient) { return {IndexVariable::kBlockY, coefficient, 0}; }
inline AffineTerm ThreadX(int64_t coefficient) { return {IndexVariable::kThreadX, coefficient, 0}; }
inline AffineTerm ThreadY(int64_t coefficient) { return {IndexVariable::kThreadY, coefficient, 0}; }
// A loop's induction variable running 0 .. trips-1.
inline AffineTerm Loop(int64_t coefficient, uint64_t trips) {
  return {IndexVariable::kLoop, coefficient, trips};
}

// An access MAPA can analyse: element index constant + terms.
inline GridAccess Affine(int array, AccessType access, uint32_t element_bytes, int64_t constant,
                         std::vector<AffineTerm> terms) {
  GridAccess a;
  a.array = array;
  a.access = access;
  a.element_bytes = element_bytes;
  a.affine = AffineIndex{constant, std::move(terms)};
  return a;
}

// An access MAPA cannot analyse (indirect or data-dependent indices): only
// the program knows what a box of blocks touches.
inline GridAccess Indirect(int array, AccessType access, uint32_t element_bytes,
                           TouchedFunction touched) {
  GridAccess a;
  a.array = array;
  a.access = access;
  a.element_bytes = element_bytes;
  a.touched = std::move(touched);
  return a;
}

// The truth of an access MAPA cannot analyse when a share touches one run
// of elements: `window(share)` gives it, [begin, end) in elements, which is
// clipped to the array.
using ElementWindowFunction = std::function<ElementRange(const GridShare& blocks)>;
inline TouchedFunction ElementWindow(const GridArray& array, uint32_t element_bytes,
                                     ElementWindowFunction window) {
  const int64_t elements = static_cast<int64_t>(array.bytes / element_bytes);
  return [window = std::move(window), element_bytes, elements,
          base = array.address](const GridShare& blocks) {
    const ElementRange range = window(blocks);
    const int64_t begin = std::clamp<int64_t>(range.begin, 0, elements);
    const int64_t end = std::clamp<int64_t>(range.end, begin, elements);
    if (end == begin) return std::vector<ByteRange>{};
    return std::vector<ByteRange>{{base + static_cast<uint64_t>(begin) * element_bytes,
                                   base + static_cast<uint64_t>(end) * element_bytes}};
  };
}

// An affine access whose threads are filtered by a condition: MAPA sees
// `index` (its representative threads ignore the condition), the threads
// that pass touch `truth`.
inline GridAccess GuardedAffine(const GridProgram& program, int array, AccessType access,
                                uint32_t element_bytes, AffineIndex index, AffineIndex truth,
                                Dim3 threads) {
  GridAccess a = Affine(array, access, element_bytes, index.constant, std::move(index.terms));
  const GridArray& target = program.arrays[array];
  a.touched = [truth = std::move(truth), threads, element_bytes, target](const GridShare& blocks) {
    std::vector<ByteRange> bytes;
    for (const ElementRange& range :
         TouchedElements(truth, blocks, threads, kPageSize / element_bytes)) {
      const int64_t begin = std::max<int64_t>(range.begin, 0);
      if (range.end <= begin) continue;
      bytes.push_back({target.address + static_cast<uint64_t>(begin) * element_bytes,
                       target.address + static_cast<uint64_t>(range.end) * element_bytes});
    }
    return bytes;
  };
  return a;
}

// Every generator's size: a fraction of the footprint the thesis ran it at
// (Table 7.10), so that a test or a sweep can run a smaller instance of
// the same shape.
inline ParamInfo ScaleParam() {
  return {"scale", ParamType::kDouble, "1",
          "fraction of the thesis's device-memory size for this application (Table 7.10)",
          ParamRange::OpenClosed(0, 1)};
}

// The side n of `matrices` n x n matrices of `element_bytes` elements that
// fill `bytes`, rounded down to a multiple of `multiple` (a thread block's
// side), at least one multiple.
inline uint64_t SquareSide(double bytes, int matrices, uint32_t element_bytes, uint64_t multiple) {
  const double side = std::sqrt(bytes / (static_cast<double>(matrices) * element_bytes));
  const uint64_t rounded = static_cast<uint64_t>(side) / multiple * multiple;
  return rounded < multiple ? multiple : rounded;
}

inline constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace umlab::grid

#endif  // UMLAB_WORKLOADS_SNURHAC_GRID_ACCESS_H_
