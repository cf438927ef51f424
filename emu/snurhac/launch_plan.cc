#include "emu/snurhac/launch_plan.h"

#include <optional>
#include <utility>

#include "emu/snurhac/execution_mode.h"
#include "emu/snurhac/grid_split.h"

namespace umlab::snurhac {

absl::StatusOr<LaunchPlan> PlanLaunch(const GridProgram& program, const GridKernel& kernel,
                                      int device_count) {
  absl::StatusOr<GridSplit> split = SplitGrid(kernel.grid, device_count);
  if (!split.ok()) return split.status();
  LaunchPlan plan;
  plan.shares = std::move(split->shares);
  if (device_count > 1) {
    LaunchSharing sharing;
    sharing.uses_atomics = kernel.uses_atomics();
    sharing.write_ranges.resize(device_count);
    for (int device = 0; device < device_count; ++device) {
      for (const GridAccess& access : kernel.accesses) {
        if (access.access == AccessType::kRead) continue;
        std::optional<std::vector<ByteRange>> ranges =
            EstimatedBytes(program, kernel, access, plan.shares[device]);
        if (!ranges.has_value()) continue;
        std::vector<ByteRange>& out = sharing.write_ranges[device];
        out.insert(out.end(), ranges->begin(), ranges->end());
      }
    }
    if (ChooseExecutionMode(sharing) == ExecutionMode::kSingleDevice) {
      plan.single_device = true;
      for (GridShare& share : plan.shares) share.extent = Dim3{0, 0, 0};
      plan.shares[0] = GridShare{Dim3{0, 0, 0}, kernel.grid};
    }
  }
  for (const GridAccess& access : kernel.accesses) {
    auto [it, inserted] = plan.read_only_arrays.try_emplace(access.array, true);
    if (access.access != AccessType::kRead) it->second = false;
  }
  return plan;
}

}  // namespace umlab::snurhac
