// SnuRHAC's cluster (DeepUM thesis ch. 6) on real processes: the host and
// one process per device (1 to 4), each device with its own userfaultfd,
// talking over Unix sockets, so that the coherence protocol runs with real
// concurrency and moves real bytes. The virtual-time reference is the
// cluster sim (emu/snurhac/cluster_sim.h); both run the same directory
// (coherence_directory.h), launch rules (launch_plan.h) and descriptor
// ownership (descriptor_owner.h).
//
// The coordinator (this process, the host, node 0) keeps the host's UM
// space, serves its pages and takes write-backs on a server thread, and
// drives the run: per kernel, the read-only flags at the descriptor owners
// (and the downgrades they order), the launch to every device, the barrier,
// and the kernel-end unmaps the owners' directories return. After the last
// kernel it has the devices give up the copied-out arrays' pages by the
// eviction rule, as the sim's copy-out does, gathers their counters, and
// with `verify` has them give up every other page too and compares the
// host's memory, word by word, with the sequential reference
// (cluster_reference.h). Device processes check every word they read.
//
// Scope: demand paging only (the thesis's plain SnuRHAC: no static,
// adjacent or correlation prefetching) and unlimited device memory (no
// eviction for room); a device's fault batch is what one read of its
// userfaultfd returns, and its blocks are served one after another.
#ifndef UMLAB_BACKENDS_EMU_UFFD_CLUSTER_H_
#define UMLAB_BACKENDS_EMU_UFFD_CLUSTER_H_

#include "absl/status/statusor.h"
#include "backends/emu/cluster_device_process.h"
#include "core/grid_program.h"
#include "emu/snurhac/real_cluster.h"

namespace umlab {

inline constexpr int kMaxUffdClusterDevices = 4;

struct UffdClusterOptions : snurhac::RealClusterRequest {
  ClusterFaultInjection inject;
  // Tests: device 0 kills itself at its first kernel (the watchdog's case).
  bool crash_device_for_testing = false;
};

using UffdClusterResult = snurhac::RealClusterResult;

// Runs `program`; fails in one line on bad options, a missing userfaultfd
// feature, a protocol error, a device process that dies, or the watchdog.
absl::StatusOr<UffdClusterResult> RunUffdCluster(const GridProgram& program,
                                                 const UffdClusterOptions& options);

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_CLUSTER_H_
