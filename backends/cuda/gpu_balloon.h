// Real oversubscription: device memory reserved with cudaMalloc so that only
// the capacity is left for managed memory. The UVM driver then runs out of
// memory by itself and evicts with its own policy, as in DeepUM's and G10's
// experiments on real GPUs.
//
// The balloon is freed when it is destroyed; the backend destroys it on
// every way out of a run, SIGINT included (it turns the signal into an error
// and unwinds). A process that is killed outright gives its device memory
// back as it exits, as every CUDA process does.
#ifndef UMLAB_BACKENDS_CUDA_GPU_BALLOON_H_
#define UMLAB_BACKENDS_CUDA_GPU_BALLOON_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace umlab::cuda {

// What the current GPU has free now (cudaMemGetInfo), or its error.
absl::StatusOr<uint64_t> GpuFreeBytes();

class GpuBalloon {
 public:
  // Reserves the GPU's free memory down to `leave_free_bytes`. Fails with a
  // one-line error when less than that is free to begin with.
  static absl::StatusOr<std::unique_ptr<GpuBalloon>> Inflate(uint64_t leave_free_bytes);
  ~GpuBalloon();
  GpuBalloon(const GpuBalloon&) = delete;
  GpuBalloon& operator=(const GpuBalloon&) = delete;

  uint64_t reserved_bytes() const { return reserved_bytes_; }
  // What the GPU reported free once the balloon was in place: the real
  // capacity left for managed memory.
  uint64_t free_bytes() const { return free_bytes_; }

 private:
  GpuBalloon() = default;

  std::vector<void*> pieces_;
  uint64_t reserved_bytes_ = 0;
  uint64_t free_bytes_ = 0;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_GPU_BALLOON_H_
