// How umlab's standalone CUDA tools (umlab_room_probe, umlab_cuda_calibrate,
// umlab_remote_probe) check a runtime call: in one line on stderr, named
// after the tool, and on to the tool's own way out.
#ifndef UMLAB_BACKENDS_CUDA_CUDA_CALL_CHECK_H_
#define UMLAB_BACKENDS_CUDA_CUDA_CALL_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdio>

namespace umlab::cuda {

class CudaCallCheck {
 public:
  explicit constexpr CudaCallCheck(const char* tool) : tool_(tool) {}

  // Whether the call succeeded; if not, prints "<tool>: <what> failed: <why>".
  bool operator()(cudaError_t error, const char* what) const {
    if (error == cudaSuccess) return true;
    std::fprintf(stderr, "%s: %s failed: %s\n", tool_, what, cudaGetErrorString(error));
    return false;
  }

 private:
  const char* tool_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CUDA_CALL_CHECK_H_
