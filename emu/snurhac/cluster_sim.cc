#include "emu/snurhac/cluster_sim.h"

#include "emu/snurhac/cluster_run.h"

namespace umlab::snurhac {

absl::StatusOr<ClusterResult> RunCluster(const GridProgram& program, const ClusterConfig& config,
                                         const DevicePolicyFactory& policies) {
  internal::ClusterRun run(program, config);
  return run.Run(policies);
}

Nanos ExplicitCopyTime(const GridProgram& program, const DeviceConfig& device) {
  Nanos time = 0;
  for (const GridArray& array : program.arrays) {
    if (array.copied_in)
      time += device.link.latency_ns +
              internal::BytesTime(array.bytes, device.link.h2d_bytes_per_second);
    if (array.copied_out)
      time += device.link.latency_ns +
              internal::BytesTime(array.bytes, device.link.d2h_bytes_per_second);
  }
  for (const GridKernel& kernel : program.launches) {
    time += device.kernel_launch_ns + kernel.compute_ns + device.kernel_grid_ns;
  }
  return time;
}

}  // namespace umlab::snurhac
