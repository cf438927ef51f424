// A grid program laid out for SnuRHAC's run on the GPUs of one machine
// (umlab_cuda_cluster, docs/snurhac.md "The cuda run"), on the host and
// before anything is timed: per launch, each device's share as the replay
// kernel's page ranges, its pace, and what the scheme does around it.
//
// Every launch comes from emu/snurhac/launch_plan.h, the cluster sim's own:
// the same split, the same single-device rule, the same touched bytes and
// the same static-prefetch ranges. What is added is the translation to the
// GPU (program addresses to the managed range, pages to DeviceRange with
// the write bit) and the mapping of SnuRHAC's schemes to what the CUDA
// driver offers:
//  - none: demand paging; the driver keeps the GPUs coherent by itself;
//  - sp: before each launch, cudaMemPrefetchAsync of each device's MAPA
//    ranges to that device (§6.5.1);
//  - read-only duplication (§6.4's read-only flag): cudaMemAdviseSetReadMostly
//    on the arrays a kernel only reads, unset on those it writes, in every
//    scheme, as the sim sets the flag at every launch in every scheme.
// dp and sp-dp have no counterpart: the driver's own prefetcher always runs
// and cannot be swapped for SnuRHAC's adjacent-page and correlation
// prefetching.
#ifndef UMLAB_BACKENDS_CUDA_CLUSTER_LAUNCHES_H_
#define UMLAB_BACKENDS_CUDA_CLUSTER_LAUNCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/replay_kernel.h"
#include "core/access_pace.h"
#include "core/byte_range.h"
#include "core/grid_program.h"
#include "emu/snurhac/launch_plan.h"

namespace umlab::cuda {

enum class ClusterScheme { kNone, kStatic };

// "none" or "sp"; dp and sp-dp are refused with the reason.
absl::StatusOr<ClusterScheme> ParseClusterScheme(const std::string& text);
const char* ClusterSchemeName(ClusterScheme scheme);  // "none", "sp"

// One device's part of one launch.
struct DeviceLaunch {
  // The share's pages as the replay kernel takes them, in managed addresses;
  // runs of one kind that follow each other are merged.
  std::vector<DeviceRange> ranges;
  uint64_t accesses = 0;  // pages, repeats included
  Nanos compute_ns = 0;   // the share's
  AccessPace pace;        // issuers and the compute after each access
  // sp: the ranges to prefetch to this device before the launch, in managed
  // addresses, whole pages, merged.
  std::vector<ByteRange> prefetch;
  uint64_t touched_bytes() const { return accesses * kPageSize; }
};

// An array's read-mostly advice at a launch.
struct ReadMostlyAdvice {
  int array = 0;
  bool set = true;  // false: unset (the kernel writes it)
};

struct ClusterLaunch {
  std::string kernel;
  bool single_device = false;
  std::vector<DeviceLaunch> devices;  // one per device, empty shares included
  // Changes to make before this launch: only arrays whose advice differs
  // from what the previous launches left.
  std::vector<ReadMostlyAdvice> advice;
};

struct ClusterLaunchOptions {
  int devices = 1;
  ClusterScheme scheme = ClusterScheme::kNone;
  bool read_mostly = true;
  // Issuers per device (DeviceConfig::access_streams, as the sim's).
  uint64_t streams = 1;
  // Where the program's address 0 is in the managed range: a multiple of
  // 2 MB, so that blocks stay blocks and bit 0 is free for the write bit.
  uint64_t base = 0;
};

// Every launch of `program`, in order. Fails on a bad device count, an
// unaligned base or an invalid program.
absl::StatusOr<std::vector<ClusterLaunch>> PlanClusterLaunches(const GridProgram& program,
                                                               const ClusterLaunchOptions& options);

// The replay kernel's ranges for page runs (program pages) at `base`.
std::vector<DeviceRange> ToDeviceRanges(const std::vector<snurhac::PageRun>& runs, uint64_t base);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CLUSTER_LAUNCHES_H_
