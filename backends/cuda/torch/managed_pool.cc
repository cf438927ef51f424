#include "backends/cuda/torch/managed_pool.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <map>
#include <mutex>

namespace umlab::cuda {
namespace {

std::mutex pool_mutex;
ManagedPoolCounters counters;
uint64_t limit_bytes = UINT64_MAX;
std::map<uint64_t, uint64_t> live_segments;  // start -> bytes
SegmentListener listener = nullptr;
void* listener_context = nullptr;

}  // namespace

ManagedPoolCounters ManagedPoolSnapshot() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  return counters;
}

void SetManagedPoolLimit(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  limit_bytes = bytes;
}

void ResetManagedPoolPeak() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  counters.peak_live_bytes = counters.live_bytes;
}

bool InManagedSegment(uint64_t address) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  auto it = live_segments.upper_bound(address);
  if (it == live_segments.begin()) return false;
  --it;
  return address - it->first < it->second;
}

void SetManagedPoolListener(SegmentListener new_listener, void* context) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  listener = new_listener;
  listener_context = context;
}

}  // namespace umlab::cuda

using umlab::cuda::counters;
using umlab::cuda::limit_bytes;
using umlab::cuda::listener;
using umlab::cuda::listener_context;
using umlab::cuda::live_segments;
using umlab::cuda::pool_mutex;

extern "C" void* umlab_malloc(long size, int device, void* /*stream*/) {
  if (size <= 0) return nullptr;
  const uint64_t bytes = static_cast<uint64_t>(size);
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (counters.live_bytes + bytes > limit_bytes) {
      if (counters.refused++ == 0) {
        std::fprintf(stderr,
                     "umlab_torch: refusing %llu more bytes of managed memory: the training "
                     "would hold more than half of the host's memory (%llu bytes)\n",
                     static_cast<unsigned long long>(bytes),
                     static_cast<unsigned long long>(limit_bytes));
      }
      return nullptr;
    }
  }
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess || current != device) cudaSetDevice(device);
  void* pointer = nullptr;
  if (cudaMallocManaged(&pointer, bytes, cudaMemAttachGlobal) != cudaSuccess) {
    cudaGetLastError();  // PyTorch reports the failure as out of memory
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(pool_mutex);
  ++counters.segments_allocated;
  counters.live_bytes += bytes;
  live_segments[reinterpret_cast<uint64_t>(pointer)] = bytes;
  if (counters.live_bytes > counters.peak_live_bytes) counters.peak_live_bytes = counters.live_bytes;
  if (listener != nullptr) listener(listener_context, true, reinterpret_cast<uint64_t>(pointer), bytes);
  return pointer;
}

extern "C" void umlab_free(void* pointer, long size, int /*device*/, void* /*stream*/) {
  if (pointer == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    ++counters.segments_freed;
    counters.live_bytes -= static_cast<uint64_t>(size);
    live_segments.erase(reinterpret_cast<uint64_t>(pointer));
    if (listener != nullptr) {
      listener(listener_context, false, reinterpret_cast<uint64_t>(pointer),
               static_cast<uint64_t>(size));
    }
  }
  cudaFree(pointer);
}
