#include "backends/cuda/uvm_tools_counters.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "backends/cuda/uvm_tools_tracker.h"

namespace umlab::cuda {
namespace {

constexpr unsigned long kInitEventTracker = 56;  // UVM_TOOLS_INIT_EVENT_TRACKER
constexpr unsigned long kEnableCounters = 60;    // UVM_TOOLS_ENABLE_COUNTERS
constexpr uint64_t kBytesToDeviceFlag = 0x1;     // UVM_COUNTER_NAME_FLAG_BYTES_XFER_HTD
constexpr uint64_t kBytesFromDeviceFlag = 0x2;   // UVM_COUNTER_NAME_FLAG_BYTES_XFER_DTH
constexpr int kBytesToDevice = 0;                // UvmCounterNameBytesXferHtD
constexpr int kBytesFromDevice = 1;              // UvmCounterNameBytesXferDtH
constexpr size_t kPage = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<UvmToolsCounters>> UvmToolsCounters::Open() {
  void* page = nullptr;
  if (posix_memalign(&page, kPage, kPage) != 0) {
    return absl::ResourceExhaustedError("UVM counters: no memory for the counter page");
  }
  std::memset(page, 0, kPage);
  UvmToolsTrackerSpec spec;
  spec.what = "UVM counters";
  spec.init_ioctl = kInitEventTracker;
  spec.control = page;  // the counters, a page the driver pins
  spec.subscribe_ioctl = kEnableCounters;
  spec.subscribe_flags = kBytesToDeviceFlag | kBytesFromDeviceFlag;
  absl::StatusOr<UvmToolsTracker> tracker = OpenUvmToolsTracker(spec);
  if (!tracker.ok()) {
    std::free(page);
    return tracker.status();
  }
  return std::unique_ptr<UvmToolsCounters>(
      new UvmToolsCounters(tracker->tools_fd, static_cast<uint64_t*>(page)));
}

UvmToolsCounters::~UvmToolsCounters() {
  close(tools_fd_);  // before the page goes: the driver unpins it on release
  std::free(counters_);
}

UvmToolsCounters::Bytes UvmToolsCounters::Read() const {
  // The driver adds to these from its own threads.
  auto load = [this](int index) {
    return __atomic_load_n(counters_ + index, __ATOMIC_RELAXED);
  };
  return {load(kBytesToDevice), load(kBytesFromDevice)};
}

}  // namespace umlab::cuda
