#include "backends/cuda/probe_kit.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace umlab::cuda {

double TimePrefetch(char* base, size_t total, size_t chunk, cudaMemLocation location,
                    cudaStream_t stream) {
  cudaStreamSynchronize(stream);
  const auto start = std::chrono::steady_clock::now();
  for (size_t offset = 0; offset + chunk <= total; offset += chunk) {
    cudaMemPrefetchAsync(base + offset, chunk, location, 0, stream);
  }
  cudaStreamSynchronize(stream);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ProbeReplay::ProbeReplay(const std::vector<DeviceRange>& ranges,
                         const std::vector<uint64_t>& accesses, unsigned workers,
                         unsigned warps_per_block, cudaStream_t stream)
    : stream_(stream), kernels_(accesses.size()) {
  cudaMalloc(reinterpret_cast<void**>(&device_ranges_),
             std::max<size_t>(1, ranges.size()) * sizeof(DeviceRange));
  cudaMemcpy(device_ranges_, ranges.data(), ranges.size() * sizeof(DeviceRange),
             cudaMemcpyHostToDevice);
  cudaMalloc(reinterpret_cast<void**>(&counters_), kernels_ * sizeof(KernelCounters));
  cudaMemset(counters_, 0, kernels_ * sizeof(KernelCounters));
  cudaHostAlloc(reinterpret_cast<void**>(&progress_), kernels_ * sizeof(KernelProgress),
                cudaHostAllocMapped);
  std::memset(progress_, 0, kernels_ * sizeof(KernelProgress));
  // The set-up above must not overlap what is measured.
  cudaDeviceSynchronize();
  size_t first_range = 0;
  for (size_t k = 0; k < kernels_; ++k) {
    ReplayKernelArgs args;
    args.ranges = device_ranges_ + first_range;
    args.range_count = accesses[k] == 0 ? 0 : ranges.size() / kernels_;
    args.accesses = accesses[k];
    args.workers = workers;
    args.counters = counters_ + k;
    args.progress = progress_ + k;
    LaunchReplayKernel(args, warps_per_block, stream_);
    first_range += args.range_count;
  }
}

std::vector<KernelProgress> ProbeReplay::Wait() {
  cudaStreamSynchronize(stream_);
  return std::vector<KernelProgress>(progress_, progress_ + kernels_);
}

ProbeReplay::~ProbeReplay() {
  cudaStreamSynchronize(stream_);
  cudaFreeHost(progress_);
  cudaFree(counters_);
  cudaFree(device_ranges_);
}

std::vector<KernelProgress> Replay(const std::vector<DeviceRange>& ranges,
                                   const std::vector<uint64_t>& accesses, unsigned workers,
                                   unsigned warps_per_block, cudaStream_t stream) {
  return ProbeReplay(ranges, accesses, workers, warps_per_block, stream).Wait();
}

}  // namespace umlab::cuda
