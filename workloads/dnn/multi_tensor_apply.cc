#include "workloads/dnn/multi_tensor_apply.h"

#include <algorithm>

namespace umlab {
namespace {

constexpr int kMaxTensors[5] = {110, 64, 48, 36, 30};
constexpr int kMaxTensorsWithScalarList[5] = {96, 64, 48, 36, 30};
constexpr uint64_t kMaxChunksPerLaunch = 320;

}  // namespace

std::vector<ForeachLaunch> MultiTensorLaunches(const std::vector<uint64_t>& elements, int depth,
                                               bool scalar_list) {
  const int slot = std::clamp(depth, 1, 5) - 1;
  const int max_tensors = scalar_list ? kMaxTensorsWithScalarList[slot] : kMaxTensors[slot];
  std::vector<ForeachLaunch> launches;
  ForeachLaunch current;
  int tensors = 0;      // tensors in the current launch's metadata
  uint64_t chunks = 0;  // chunks (thread blocks) in it
  for (int i = 0; i < static_cast<int>(elements.size()); ++i) {
    if (elements[i] == 0) continue;
    ++tensors;
    const uint64_t tensor_chunks = (elements[i] + kForeachChunkElements - 1) / kForeachChunkElements;
    uint64_t first = 0;
    for (uint64_t chunk = 0; chunk < tensor_chunks; ++chunk) {
      ++chunks;
      const bool last_chunk = chunk + 1 == tensor_chunks;
      const bool tensors_full = tensors == max_tensors && last_chunk;
      if (!tensors_full && chunks != kMaxChunksPerLaunch) continue;
      current.push_back({i, first, chunk + 1});
      launches.push_back(std::move(current));
      current.clear();
      chunks = 0;
      first = chunk + 1;
      // A tensor cut in the middle opens the next launch's metadata.
      tensors = last_chunk ? 0 : 1;
    }
    if (first < tensor_chunks) current.push_back({i, first, tensor_chunks});
  }
  if (!current.empty()) launches.push_back(std::move(current));
  return launches;
}

}  // namespace umlab
