#include "backends/cuda/uvm_event_queue.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "backends/cuda/uvm_tools_tracker.h"

namespace umlab::cuda {
namespace {

constexpr unsigned long kInitEventTrackerV2 = 76;  // UVM_TOOLS_INIT_EVENT_TRACKER_V2
constexpr unsigned long kEnableEvents = 58;        // UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS
constexpr unsigned long kFlushEvents = 67;         // UVM_TOOLS_FLUSH_EVENTS, on /dev/nvidia-uvm
constexpr size_t kPage = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<UvmEventQueue>> UvmEventQueue::Open(bool faults, uint32_t entries) {
  if (entries < 2 || (entries & (entries - 1)) != 0) {
    return absl::InvalidArgumentError("UVM event queue: its size must be a power of two");
  }
  const size_t ring_bytes = (size_t{entries} * kUvmEventBytes + kPage - 1) / kPage * kPage;
  void* events = nullptr;
  void* control = nullptr;
  if (posix_memalign(&events, kPage, ring_bytes) != 0 ||
      posix_memalign(&control, kPage, kPage) != 0) {
    std::free(events);
    return absl::ResourceExhaustedError("UVM event queue: no memory for the queue");
  }
  std::memset(events, 0, ring_bytes);
  std::memset(control, 0, kPage);
  UvmToolsTrackerSpec spec;
  spec.what = "UVM event queue";
  spec.init_ioctl = kInitEventTrackerV2;
  spec.queue = events;
  spec.queue_entries = entries;
  spec.control = control;
  spec.subscribe_ioctl = kEnableEvents;
  spec.subscribe_flags = uint64_t{1} << kUvmMigrationEvent;
  if (faults) spec.subscribe_flags |= uint64_t{1} << kUvmGpuFaultEvent;
  absl::StatusOr<UvmToolsTracker> tracker = OpenUvmToolsTracker(spec);
  if (!tracker.ok()) {
    std::free(events);
    std::free(control);
    return tracker.status();
  }
  return std::unique_ptr<UvmEventQueue>(
      new UvmEventQueue(tracker->tools_fd, tracker->uvm_fd, static_cast<unsigned char*>(events),
                        entries, static_cast<UvmEventControl*>(control)));
}

UvmEventQueue::~UvmEventQueue() {
  close(tools_fd_);  // before the buffers go: the driver unpins them on release
  std::free(events_);
  std::free(control_);
}

void UvmEventQueue::Flush() {
  uint32_t status = 0;  // UVM_TOOLS_FLUSH_EVENTS_PARAMS
  ioctl(uvm_fd_, kFlushEvents, &status);
}

}  // namespace umlab::cuda
