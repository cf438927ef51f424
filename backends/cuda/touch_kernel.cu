#include "backends/cuda/touch_kernel.h"

namespace umlab::cuda {
namespace {

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t time;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
  return time;
}

__global__ void TouchPages(const uint64_t* pages, uint64_t count, uint64_t per_access_ns) {
  // One thread per block issues the accesses: the order within an SM is the
  // program's, as in the sim; the other SMs run concurrently.
  if (threadIdx.x != 0) return;
  uint32_t sum = 0;
  for (uint64_t i = blockIdx.x; i < count; i += gridDim.x) {
    const uint64_t entry = pages[i];
    volatile uint32_t* word = reinterpret_cast<volatile uint32_t*>(entry & ~uint64_t{1});
    if (entry & 1) {
      *word = static_cast<uint32_t>(i);
    } else {
      sum += *word;
    }
    const uint64_t until = GlobalTimerNs() + per_access_ns;
    while (GlobalTimerNs() < until) {
    }
  }
  // Keeps the reads from being optimised away without writing anything.
  if (sum == 0xdeadbeefu && count == 0) *const_cast<uint64_t*>(pages) = sum;
}

}  // namespace

cudaError_t LaunchTouchKernel(const uint64_t* pages, uint64_t count, unsigned blocks,
                              uint64_t per_access_ns, cudaStream_t stream) {
  if (count == 0 || blocks == 0) return cudaSuccess;
  TouchPages<<<blocks, 32, 0, stream>>>(pages, count, per_access_ns);
  return cudaGetLastError();
}

}  // namespace umlab::cuda
