#include "emu/snurhac/launch_plan.h"

#include <cmath>
#include <optional>

#include "emu/snurhac/execution_mode.h"
#include "emu/snurhac/grid_split.h"

namespace umlab::snurhac {

absl::StatusOr<LaunchPlan> PlanLaunch(const GridProgram& program, const GridKernel& kernel,
                                      int devices) {
  absl::StatusOr<GridSplit> split = SplitGrid(kernel.grid, devices);
  if (!split.ok()) return split.status();
  LaunchPlan plan;
  plan.shares = split->shares;
  if (devices > 1) {
    // §6.4: the launch computes each device's write ranges from MAPA's
    // view; writes MAPA cannot analyse are unknown to it and not counted.
    LaunchSharing sharing;
    sharing.uses_atomics = kernel.uses_atomics();
    sharing.write_ranges.resize(devices);
    for (int device = 0; device < devices; ++device) {
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
    auto [it, inserted] = plan.only_read.try_emplace(access.array, true);
    if (access.access != AccessType::kRead) it->second = false;
  }
  return plan;
}

std::vector<PageRun> SharePageRuns(const GridProgram& program, const GridKernel& kernel,
                                   const GridShare& share) {
  std::vector<PageRun> runs;
  for (const GridAccess& access : kernel.accesses) {
    for (const ByteRange& range : TouchedBytes(program, kernel, access, share)) {
      runs.push_back(PageRun{PageOfAddress(range.begin), PagesSpanned(range.begin, range.size()),
                             access.access != AccessType::kRead});
    }
  }
  return runs;
}

Nanos ShareComputeNs(const GridKernel& kernel, const GridShare& share) {
  const double fraction =
      static_cast<double>(share.extent.Volume()) / static_cast<double>(kernel.grid.Volume());
  return static_cast<Nanos>(std::llround(static_cast<double>(kernel.compute_ns) * fraction));
}

std::vector<PrefetchRange> StaticPrefetchRanges(const GridProgram& program,
                                                const GridKernel& kernel, const GridShare& share) {
  std::vector<PrefetchRange> out;
  for (const GridAccess& access : kernel.accesses) {
    std::optional<std::vector<ByteRange>> ranges = EstimatedBytes(program, kernel, access, share);
    if (!ranges.has_value()) continue;
    for (const ByteRange& range : *ranges) {
      out.push_back(PrefetchRange{range, access.access != AccessType::kRead});
    }
  }
  return out;
}

}  // namespace umlab::snurhac
