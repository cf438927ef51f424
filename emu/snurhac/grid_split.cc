#include "emu/snurhac/grid_split.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace umlab::snurhac {
namespace {

// The member of a Dim3 that counts blocks along `axis`.
uint32_t Dim3::*Along(GridAxis axis) {
  switch (axis) {
    case GridAxis::kY:
      return &Dim3::y;
    case GridAxis::kZ:
      return &Dim3::z;
    case GridAxis::kX:
      break;
  }
  return &Dim3::x;
}

}  // namespace

absl::StatusOr<GridSplit> SplitGrid(const Dim3& grid, int device_count) {
  if (device_count <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a grid is split over at least one device, not %d", device_count));
  }
  if (grid.Volume() == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "grid (%d, %d, %d) has no blocks; every dimension is at least 1", grid.x, grid.y, grid.z));
  }
  const uint32_t devices = static_cast<uint32_t>(device_count);
  GridSplit split;
  split.axis = grid.z >= devices ? GridAxis::kZ : grid.y >= devices ? GridAxis::kY : GridAxis::kX;
  uint32_t Dim3::*const along = Along(split.axis);
  const uint32_t length = grid.*along;
  const uint32_t base = length / devices;
  const uint32_t larger = length % devices;  // this many chunks get one block more
  uint32_t next = 0;
  for (uint32_t device = 0; device < devices; ++device) {
    GridShare share;
    share.extent = grid;
    const uint32_t size = base + (device < larger ? 1 : 0);
    share.first.*along = next;
    share.extent.*along = size;
    next += size;
    split.shares.push_back(share);
  }
  return split;
}

}  // namespace umlab::snurhac
