// The GPU kernel that plays one program kernel: it touches the kernel's
// pages in program order over `blocks` thread blocks (one per SM, as the
// sim's SMs) and spends the kernel's compute time spread over its accesses.
#ifndef UMLAB_BACKENDS_CUDA_TOUCH_KERNEL_H_
#define UMLAB_BACKENDS_CUDA_TOUCH_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace umlab::cuda {

// `pages` (device memory) holds one entry per page access: the page's
// device address, with bit 0 set for a write. Block b takes entries b,
// b + blocks, ... and after each access waits until `per_access_ns` has
// passed on the GPU's global timer, so that with every page resident the
// kernel lasts its compute time.
cudaError_t LaunchTouchKernel(const uint64_t* pages, uint64_t count, unsigned blocks,
                              uint64_t per_access_ns, cudaStream_t stream);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TOUCH_KERNEL_H_
