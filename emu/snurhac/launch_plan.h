// What one launch of a grid kernel gives each device under SnuRHAC (DeepUM
// thesis §6.2, §6.4, §6.5.1): its share of the grid after the split and the
// single-device rule, the pages the share really touches, its compute, the
// ranges static prefetching asks for, and which arrays the kernel only reads
// (the read-only flag).
//
// Every way of running a cluster takes its launches from here: the cluster
// sim (cluster_run.cc), the uffd processes (backends/emu/uffd_cluster.h) and
// the cuda backend's cluster run (backends/cuda/cluster_launches.h), so that
// a prediction and a measurement split, touch and prefetch the same bytes.
#ifndef UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_
#define UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/byte_range.h"
#include "core/grid_program.h"
#include "core/memory_units.h"
#include "core/thread_grid.h"

namespace umlab::snurhac {

// A run of pages a share accesses, in order, all read or all written.
struct PageRun {
  PageNumber first = 0;
  uint64_t count = 0;
  bool write = false;
};

// A range static prefetching fetches, with the access's type (a write
// range is fetched for writing).
struct PrefetchRange {
  ByteRange bytes;
  bool write = false;
};

struct LaunchPlan {
  // One per device; every device's but device 0's is empty when the
  // kernel runs on one device.
  std::vector<GridShare> shares;
  bool single_device = false;  // §6.4's rule sent the kernel to device 0
  // Every array the kernel uses, and whether it only reads it (§6.4: the
  // read-only flag is set on those at the launch and cleared on the rest).
  std::map<int, bool> only_read;
};

// Splits `kernel` over `devices` (grid_split.h) and applies the
// single-device rule (execution_mode.h) to MAPA's write ranges; writes MAPA
// cannot analyse are unknown to the runtime and not counted.
absl::StatusOr<LaunchPlan> PlanLaunch(const GridProgram& program, const GridKernel& kernel,
                                      int devices);

// The pages `share` really touches (TouchedBytes), access by access in the
// kernel's order; the runs of one access in address order.
std::vector<PageRun> SharePageRuns(const GridProgram& program, const GridKernel& kernel,
                                   const GridShare& share);

// A share's compute: the kernel's, times its fraction of the blocks.
Nanos ShareComputeNs(const GridKernel& kernel, const GridShare& share);

// §6.5.1: MAPA's ranges for `share` (EstimatedBytes) of every access it can
// analyse, in the accesses' order.
std::vector<PrefetchRange> StaticPrefetchRanges(const GridProgram& program,
                                                const GridKernel& kernel, const GridShare& share);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_
