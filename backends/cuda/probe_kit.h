// What the GPU probes (umlab_cuda_calibrate, umlab_call_overlap_probe)
// share: timed prefetches, and runs of replay kernels over given ranges,
// launched on a stream and waited for later, so that a probe can make
// driver calls while its kernels fault.
#ifndef UMLAB_BACKENDS_CUDA_PROBE_KIT_H_
#define UMLAB_BACKENDS_CUDA_PROBE_KIT_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/replay_kernel.h"

namespace umlab::cuda {

// Moves `total` bytes at `base` to `location` in calls of `chunk` bytes on
// `stream`, after what is queued there; the seconds until all had landed.
double TimePrefetch(char* base, size_t total, size_t chunk, cudaMemLocation location,
                    cudaStream_t stream);

class ProbeReplay {
 public:
  // Launches one replay kernel per entry of `accesses` (its access count),
  // back to back on `stream` with no compute, splitting `ranges` evenly
  // among them; `workers` issuers, `warps_per_block` to a thread block.
  // Returns once they are queued.
  ProbeReplay(const std::vector<DeviceRange>& ranges, const std::vector<uint64_t>& accesses,
              unsigned workers, unsigned warps_per_block, cudaStream_t stream);
  ~ProbeReplay();
  ProbeReplay(const ProbeReplay&) = delete;
  ProbeReplay& operator=(const ProbeReplay&) = delete;

  // Waits for the kernels; their begin and end stamps on the GPU's clock.
  std::vector<KernelProgress> Wait();

 private:
  cudaStream_t stream_;
  size_t kernels_;
  DeviceRange* device_ranges_ = nullptr;
  KernelCounters* counters_ = nullptr;
  KernelProgress* progress_ = nullptr;  // host-mapped
};

// ProbeReplay(...).Wait().
std::vector<KernelProgress> Replay(const std::vector<DeviceRange>& ranges,
                                   const std::vector<uint64_t>& accesses, unsigned workers,
                                   unsigned warps_per_block, cudaStream_t stream);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_PROBE_KIT_H_
