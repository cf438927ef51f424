// The allocator PyTorch's caching allocator draws its segments from under
// `umlab_torch`: CUDA managed memory instead of cudaMalloc, so the UVM
// driver pages it and the GPU can be oversubscribed. PyTorch keeps its own
// splitting and caching on top (python/umlab_torch routes every allocation
// of the device to a torch.cuda.MemPool over this allocator).
//
// The C functions umlab_malloc and umlab_free are what
// torch.cuda.memory.CUDAPluggableAllocator loads from this library.
#ifndef UMLAB_BACKENDS_CUDA_TORCH_MANAGED_POOL_H_
#define UMLAB_BACKENDS_CUDA_TORCH_MANAGED_POOL_H_

#include <cstdint>

namespace umlab::cuda {

struct ManagedPoolCounters {
  uint64_t segments_allocated = 0;
  uint64_t segments_freed = 0;
  uint64_t live_bytes = 0;
  uint64_t peak_live_bytes = 0;
  uint64_t refused = 0;  // allocations past the host-memory guard
};

// The counters so far (thread-safe).
ManagedPoolCounters ManagedPoolSnapshot();
// Managed memory is backed by host memory once evicted; past this many live
// bytes an allocation fails (PyTorch then reports out of memory), so that a
// training never takes more than half of the host's RAM.
void SetManagedPoolLimit(uint64_t bytes);
// Forgets the peak: the next peak is measured from now.
void ResetManagedPoolPeak();
// Whether `address` lies in a live managed segment (thread-safe).
bool InManagedSegment(uint64_t address);
// Hears every segment allocated (after) and freed (before it goes), on the
// allocating thread; nullptr stops it. For the live engine's allocator
// events.
using SegmentListener = void (*)(void* context, bool allocated, uint64_t address,
                                 uint64_t bytes);
void SetManagedPoolListener(SegmentListener listener, void* context);

}  // namespace umlab::cuda

extern "C" {
void* umlab_malloc(long size, int device, void* stream);
void umlab_free(void* pointer, long size, int device, void* stream);
}

#endif  // UMLAB_BACKENDS_CUDA_TORCH_MANAGED_POOL_H_
