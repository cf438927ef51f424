// What SnuRHAC's runtime decides at a kernel's launch (DeepUM thesis §6.2,
// §6.4), shared by every way of running a cluster (the virtual-time sim and
// the uffd processes): which device runs which share of the grid, whether
// the kernel goes to device 0 alone, and which arrays it only reads (their
// blocks get the read-only flag).
#ifndef UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_
#define UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_

#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "core/grid_program.h"

namespace umlab::snurhac {

struct LaunchPlan {
  // One per device, in device order; an idle device's share is empty.
  std::vector<GridShare> shares;
  // §6.4's rule sent the kernel to device 0 alone.
  bool single_device = false;
  // Every array the kernel uses: true if it only reads it.
  std::map<int, bool> read_only_arrays;
};

// The grid split (grid_split.h), then the single-device rule on MAPA's
// write ranges (execution_mode.h; writes MAPA cannot analyse are unknown to
// the runtime and not counted).
absl::StatusOr<LaunchPlan> PlanLaunch(const GridProgram& program, const GridKernel& kernel,
                                      int device_count);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_LAUNCH_PLAN_H_
