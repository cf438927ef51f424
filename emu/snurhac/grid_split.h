// SnuRHAC's workload distribution (DeepUM thesis §6.2): a kernel's grid of
// thread blocks is cut along one dimension into one contiguous chunk per
// device. The dimension is z if the grid has at least as many blocks along z
// as there are devices, else y under the same test, else x. Cutting across
// z and y first keeps each chunk's rows of x-adjacent blocks whole: CUDA
// programs coalesce their accesses along x, and neighbouring blocks tend to
// touch the same pages. Devices are assumed equally fast, so the chunks are
// as equal as whole blocks allow (sizes differ by at most one, the larger
// ones first). A grid with fewer blocks along x than devices leaves the last
// devices without work.
//
// The thesis's Figure 6.2 text says grid (b) "will be partitioned in the x
// dimension even though there are enough blocks in the y dimension"; the
// algorithm printed just above it, and the statement that (a), a cut along
// y, is the final partition, say otherwise. The algorithm is what is built.
#ifndef UMLAB_EMU_SNURHAC_GRID_SPLIT_H_
#define UMLAB_EMU_SNURHAC_GRID_SPLIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace umlab::snurhac {

// A grid's size, or a position in it, in thread blocks: CUDA's dim3.
struct Dim3 {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;

  uint64_t Volume() const { return uint64_t{x} * y * z; }
  bool operator==(const Dim3&) const = default;
};

enum class GridAxis { kX, kY, kZ };

// One device's chunk: the blocks first .. first + extent - 1 on each axis.
// An empty chunk has extent 0 along the cut axis.
struct GridShare {
  Dim3 first{0, 0, 0};
  Dim3 extent;

  bool empty() const { return extent.Volume() == 0; }
  bool operator==(const GridShare&) const = default;
};

struct GridSplit {
  GridAxis axis = GridAxis::kX;
  std::vector<GridShare> shares;  // one per device, in device order
};

// `grid` has at least one block on each axis; device_count > 0.
absl::StatusOr<GridSplit> SplitGrid(const Dim3& grid, int device_count);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_GRID_SPLIT_H_
