// The GPU kernel that plays one program kernel.
//
// `workers` issuers (one lane of a warp each; the sim's SMs times
// DeviceConfig::warps_per_sm) take the kernel's page accesses from a shared
// cursor, in program order, and compute for `per_access_ns` after each, so
// that with every page resident the kernel lasts its compute time. An
// access that stalls (a far fault) delays its issuer by the stall, as a
// faulting issuer waits in the sim; reads wait for their data and writes
// are read-modify-writes for the same reason.
//
// The first thread block to start stamps the kernel's begin (when its first
// issuer started), and the last issuer to finish stamps its end, on the GPU's
// global timer into host-mapped memory: the host learns of both without
// synchronising with the stream. The issuers of a block count themselves in
// shared memory, so the kernel's counters take one atomic per block.
#ifndef UMLAB_BACKENDS_CUDA_REPLAY_KERNEL_H_
#define UMLAB_BACKENDS_CUDA_REPLAY_KERNEL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace umlab::cuda {

// A run of pages: the device address of its first page, with bit 0 set for
// writes, and the index of its first access within the kernel.
struct DeviceRange {
  uint64_t address_and_write;
  uint64_t first_access;
};

// Device memory, zeroed before the launch; one per kernel.
struct KernelCounters {
  unsigned long long cursor;  // the next access to take
  unsigned int started;       // thread blocks that began
  unsigned int finished;      // thread blocks whose issuers all ended
};

// Host-mapped pinned memory; 0 until the GPU stamps it.
struct KernelProgress {
  uint64_t begin_ns;  // GPU global timer
  uint64_t end_ns;
};

struct ReplayKernelArgs {
  const DeviceRange* ranges = nullptr;  // device memory
  uint64_t range_count = 0;
  uint64_t accesses = 0;
  unsigned int workers = 1;
  // Compute after each access, per issuer; a kernel without accesses
  // computes for `compute_ns` on one issuer.
  uint64_t per_access_ns = 0;
  uint64_t compute_ns = 0;
  KernelCounters* counters = nullptr;
  KernelProgress* progress = nullptr;  // device pointer to host-mapped memory
};

// Launches on `stream`, `warps_per_block` issuers to a thread block.
cudaError_t LaunchReplayKernel(const ReplayKernelArgs& args, unsigned warps_per_block,
                               cudaStream_t stream);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_REPLAY_KERNEL_H_
