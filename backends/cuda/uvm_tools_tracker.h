// A tracker on the UVM tools device (/dev/nvidia-uvm-tools), bound to this
// process's UVM address space, as a profiler binds one: the way umlab reads
// the UVM driver itself, beside CUPTI. Two kinds share it: counters (a page
// of byte sums the driver adds to, uvm_tools_counters.h) and event queues
// (a ring of the driver's events, uvm_event_queue.h).
//
// The ABI is the one in NVIDIA's open kernel modules (kernel-open/
// nvidia-uvm/uvm_ioctl.h and uvm_types.h): ioctl numbers are the function
// numbers themselves, and each parameter block ends in an NV_STATUS the
// driver fills (0: NV_OK).
#ifndef UMLAB_BACKENDS_CUDA_UVM_TOOLS_TRACKER_H_
#define UMLAB_BACKENDS_CUDA_UVM_TOOLS_TRACKER_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace umlab::cuda {

struct UvmToolsTracker {
  int tools_fd = -1;  // the tracker lives as long as this file is open
  int uvm_fd = -1;    // the process's /dev/nvidia-uvm it is bound to
};

// What a tracker is made of: the ioctl that creates it (its number picks
// the event layout), the buffers the driver pins for as long as the tracker
// lives (a queue of `queue_entries` events, or none for counters; the
// control page), and the ioctl and flags that subscribe it.
struct UvmToolsTrackerSpec {
  const char* what;  // "UVM counters", for the errors
  unsigned long init_ioctl;
  void* queue = nullptr;
  uint64_t queue_entries = 0;
  void* control;
  unsigned long subscribe_ioctl;
  uint64_t subscribe_flags;
};

// Needs CUDA to have opened the UVM device already (a live context). Tries
// each /dev/nvidia-uvm file of the process, since only the driver can tell
// which one holds the address space; says in one line why none took.
absl::StatusOr<UvmToolsTracker> OpenUvmToolsTracker(const UvmToolsTrackerSpec& spec);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_UVM_TOOLS_TRACKER_H_
