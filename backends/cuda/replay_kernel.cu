#include "backends/cuda/replay_kernel.h"

namespace umlab::cuda {
namespace {

// An access slower than this stalled (a far fault takes tens of
// microseconds); a resident one takes well under it even when all SMs
// contend for the cursor.
constexpr uint64_t kStallNs = 5000;

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t time;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
  return time;
}

// Spins until `target`. The loop condition uses `dependency`, the value the
// access returned, so the warp cannot pass it before the access completes;
// the timer read after the loop is then taken after the access.
__device__ __forceinline__ uint64_t SpinUntil(uint64_t target, uint32_t dependency) {
  uint64_t now = GlobalTimerNs();
  while (now + dependency < target) now = GlobalTimerNs();
  return GlobalTimerNs();
}

__global__ void ReplayProgramKernel(ReplayKernelArgs args, uint32_t zero) {
  // The issuers of this thread block that have finished (below).
  __shared__ unsigned block_finished;
  if (threadIdx.x == 0) block_finished = 0;
  __syncthreads();
  // Lane 0 of each warp is an issuer: an issuer's accesses are in program
  // order, as in the sim.
  if (threadIdx.x % 32 != 0) return;
  const unsigned warps_per_block = blockDim.x / 32;
  const unsigned worker = blockIdx.x * warps_per_block + threadIdx.x / 32;
  if (worker >= args.workers) return;
  const unsigned block_workers = min(warps_per_block, args.workers - blockIdx.x * warps_per_block);
  // The schedule starts when the issuer does. The bookkeeping below only
  // delays its first access, which the schedule then absorbs; it used to
  // come first and delayed every issuer's whole schedule, by the stamp's
  // system fence and by all issuers' atomics on one counter, about 2-3 us
  // per kernel at any compute (docs/fidelity.md "Replay pace").
  const uint64_t start = GlobalTimerNs();
  uint64_t scheduled = start;
  // One issuer per block takes part in electing the first, so the election
  // costs a kernel one atomic per block rather than one per issuer.
  if (threadIdx.x == 0 && atomicAdd(&args.counters->started, 1u) == 0) {
    args.progress->begin_ns = start;
    __threadfence_system();
  }
  if (args.accesses == 0) {
    SpinUntil(scheduled + args.compute_ns, 0);
  } else {
    uint64_t range = 0;
    for (;;) {
      const uint64_t i = atomicAdd(&args.counters->cursor, 1ull);
      if (i >= args.accesses) break;
      // Each block's indices only grow, so its range cursor only moves on.
      while (range + 1 < args.range_count && args.ranges[range + 1].first_access <= i) ++range;
      const DeviceRange entry = args.ranges[range];
      const uint64_t address =
          (entry.address_and_write & ~uint64_t{1}) + (i - entry.first_access) * 4096;
      uint32_t value;
      if (entry.address_and_write & 1) {
        value = atomicAdd(reinterpret_cast<unsigned int*>(address), 1u);
      } else {
        value = *reinterpret_cast<volatile uint32_t*>(address);
      }
      // `zero` is 0 at run time but unknown to the compiler: the spin
      // depends on the value without changing the target.
      const uint64_t target = scheduled + args.per_access_ns;
      const uint64_t done = SpinUntil(target, value & zero);
      scheduled = done > target + kStallNs ? done : target;
    }
  }
  // The block's last issuer to finish counts the block; the last block
  // stamps the end. Each fence makes this issuer's page writes visible
  // before the count that the stamping issuer observes.
  __threadfence();
  if (atomicAdd(&block_finished, 1u) != block_workers - 1) return;
  __threadfence();
  if (atomicAdd(&args.counters->finished, 1u) == gridDim.x - 1) {
    args.progress->end_ns = GlobalTimerNs();
    __threadfence_system();
  }
}

}  // namespace

cudaError_t LaunchReplayKernel(const ReplayKernelArgs& args, unsigned warps_per_block,
                               cudaStream_t stream) {
  ReplayKernelArgs launched = args;
  if (launched.accesses == 0 || launched.workers == 0) launched.workers = 1;
  if (warps_per_block == 0) warps_per_block = 1;
  const unsigned blocks = (launched.workers + warps_per_block - 1) / warps_per_block;
  ReplayProgramKernel<<<blocks, 32 * warps_per_block, 0, stream>>>(launched, 0u);
  return cudaGetLastError();
}

}  // namespace umlab::cuda
