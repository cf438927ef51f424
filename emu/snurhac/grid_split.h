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
#include "core/thread_grid.h"

namespace umlab::snurhac {

enum class GridAxis { kX, kY, kZ };

struct GridSplit {
  GridAxis axis = GridAxis::kX;
  // One per device, in device order (core/thread_grid.h). An empty share
  // has extent 0 along the cut axis.
  std::vector<GridShare> shares;
};

// `grid` has at least one block on each axis; device_count > 0.
absl::StatusOr<GridSplit> SplitGrid(const Dim3& grid, int device_count);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_GRID_SPLIT_H_
