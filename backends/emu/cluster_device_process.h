// One device of the uffd cluster (backends/emu/uffd_cluster.h), running in
// a process of its own after the fork. Its threads:
//  - the workers (`threads` of them) run the device's share of each kernel:
//    they really load and store every word the grid program's truth says
//    the share touches, stores writing WordValue(kernel, word), loads
//    checked against the reference (cluster_reference.h);
//  - the fault handler reads the process's userfaultfd, groups the faults
//    of a read by block, and runs SnuRHAC's protocol for each block in
//    turn: the lock and the fault list to the block's descriptor owner, the
//    downgrades and the page fetches the owner's plan names, each
//    acknowledged, the pages installed, the unlock, the wake-up;
//  - the server answers the other processes: as a descriptor owner (lock,
//    resolve, unlock, evict, and the host's read-only flags and kernel
//    ends, all by this process's CoherenceDirectory, which holds the
//    descriptors this device owns), and as a page holder (downgrade, serve
//    bytes, unmap);
//  - the main thread follows the coordinator's commands: run a kernel,
//    give pages up for the copy-out, report counters, quit.
// Any failure sends a one-line error to the coordinator and ends the
// process.
#ifndef UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_PROCESS_H_
#define UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_PROCESS_H_

#include "backends/emu/cluster_wiring.h"
#include "core/grid_program.h"

namespace umlab {

// Deliberate protocol breakage, for showing that the checks catch it.
struct ClusterFaultInjection {
  // The old writer acknowledges a downgrade without write-protecting.
  bool skip_downgrade = false;
  // Devices acknowledge the kernel-end unmaps without unmapping.
  bool skip_kernel_end_unmap = false;
};

struct ClusterDeviceOptions {
  int device = 0;
  int devices = 1;
  int threads = 2;  // workers per device
  ClusterFaultInjection inject;
  // Tests: the process kills itself (SIGKILL) at its first kernel.
  bool crash_at_first_kernel = false;
};

// Runs the device until the coordinator says quit; returns the process's
// exit status (0, or 1 after reporting an error).
int RunClusterDevice(const GridProgram& program, const ClusterDeviceOptions& options,
                     ClusterWiring::Ends ends);

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_PROCESS_H_
