#include "emu/snurhac/execution_mode.h"

#include <algorithm>
#include <utility>

namespace umlab::snurhac {

double WriteOverlapRatio(const std::vector<std::vector<ByteRange>>& write_ranges) {
  // A sweep over range ends: between two consecutive ends, the number of
  // devices writing is constant.
  std::vector<std::pair<uint64_t, int>> edges;  // (address, +1 at a start, -1 at an end)
  for (const std::vector<ByteRange>& device_ranges : write_ranges) {
    // Merged first, so that a device counts once where its own ranges
    // overlap.
    for (const ByteRange& range : MergedRanges(device_ranges)) {
      edges.emplace_back(range.begin, +1);
      edges.emplace_back(range.end, -1);
    }
  }
  std::sort(edges.begin(), edges.end());
  uint64_t written = 0;
  uint64_t shared = 0;
  int writers = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    writers += edges[i].second;
    if (i + 1 == edges.size()) break;
    const uint64_t span = edges[i + 1].first - edges[i].first;
    if (writers >= 1) written += span;
    if (writers >= 2) shared += span;
  }
  return written == 0 ? 0.0 : static_cast<double>(shared) / static_cast<double>(written);
}

ExecutionMode ChooseExecutionMode(const LaunchSharing& sharing, double threshold) {
  if (sharing.uses_atomics) return ExecutionMode::kSingleDevice;
  return WriteOverlapRatio(sharing.write_ranges) > threshold ? ExecutionMode::kSingleDevice
                                                            : ExecutionMode::kAllDevices;
}

}  // namespace umlab::snurhac
