// The UVM driver's migration events, read from an event queue of umlab's
// own on the UVM tools device: every transfer the driver makes, each way,
// with its cause and its begin and end on the GPU's clock; and, if asked
// for, every GPU fault it services, with its address and when the GPU
// raised it.
//
// CUPTI builds its unified-memory records from the same events, through a
// queue of its own that it drains from its API; while a policy's
// pre-evictions run, that queue overflows and the driver drops events with
// nothing reported (docs/fidelity.md, "CUPTI's missing write-backs"). This
// queue is large (2^18 events, 18 MiB the driver pins) and is drained by
// plain memory reads from the engine's polling loop, so it keeps up; the
// driver's own drop count for it is read back (dropped()).
//
// Linux only, and only where the tools device can be opened and knows the
// second event layout (UVM_TOOLS_INIT_EVENT_TRACKER_V2); Open says why not
// in one line otherwise.
#ifndef UMLAB_BACKENDS_CUDA_UVM_EVENT_QUEUE_H_
#define UMLAB_BACKENDS_CUDA_UVM_EVENT_QUEUE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/uvm_event_ring.h"

namespace umlab::cuda {

class UvmEventQueue {
 public:
  // `entries`: a power of two, at least 2. `faults`: the GPU faults too.
  static absl::StatusOr<std::unique_ptr<UvmEventQueue>> Open(bool faults = false,
                                                             uint32_t entries = 1u << 18);
  ~UvmEventQueue();
  UvmEventQueue(const UvmEventQueue&) = delete;
  UvmEventQueue& operator=(const UvmEventQueue&) = delete;

  // The driver reports a migration once its copy is seen finished, which
  // may wait on the channel; this has it report every finished one now.
  void Flush();
  // Appends the migrations queued so far as transfer records, and the
  // faults as fault events, their times on the records' clock:
  // `gpu_to_records_ns` is added to the GPU's. One thread at a time.
  void Drain(std::vector<UnifiedMemoryRecord>& out, uint64_t gpu_to_records_ns) {
    ring_.Drain(out, gpu_to_records_ns);
  }
  // Events the driver dropped because this queue was full.
  uint64_t dropped() const { return ring_.dropped_events(); }

 private:
  UvmEventQueue(int tools_fd, int uvm_fd, unsigned char* events, uint32_t entries,
                UvmEventControl* control)
      : tools_fd_(tools_fd), uvm_fd_(uvm_fd), events_(events), control_(control),
        ring_(events, entries, control) {}

  int tools_fd_;
  int uvm_fd_;             // the CUDA driver's; not ours to close
  unsigned char* events_;  // the driver pins these two while tools_fd_ is open
  UvmEventControl* control_;
  UvmEventRing ring_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_UVM_EVENT_QUEUE_H_
