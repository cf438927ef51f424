#include "emu/snurhac/cluster_sim.h"

#include <algorithm>

#include "emu/snurhac/cluster_run.h"

namespace umlab::snurhac {

void ClusterDeviceStats::Add(const ClusterDeviceStats& other) {
  faults += other.faults;
  dropped_faults += other.dropped_faults;
  fault_batches += other.fault_batches;
  faulted_pages += other.faulted_pages;
  lock_waits += other.lock_waits;
  host_fetch_bytes += other.host_fetch_bytes;
  zero_filled_bytes += other.zero_filled_bytes;
  peer_fetch_bytes += other.peer_fetch_bytes;
  upgrades += other.upgrades;
  downgrades += other.downgrades;
  static_prefetch_bytes += other.static_prefetch_bytes;
  adjacent_prefetch_bytes += other.adjacent_prefetch_bytes;
  policy_prefetch_bytes += other.policy_prefetch_bytes;
  evictions += other.evictions;
  write_back_bytes += other.write_back_bytes;
  kernel_end_unmapped_pages += other.kernel_end_unmapped_pages;
  peak_frames = std::max(peak_frames, other.peak_frames);
  busy_ns += other.busy_ns;
}

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
