#include "backends/cuda/uvm_tools_counters.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace umlab::cuda {
namespace {

// The UVM driver's ABI (NVIDIA open-gpu-kernel-modules, kernel-open/
// nvidia-uvm/uvm_ioctl.h and uvm_types.h): ioctl numbers are the function
// numbers themselves, and each parameter block ends in an NV_STATUS the
// driver fills (0: NV_OK).
constexpr unsigned long kInitEventTracker = 56;  // UVM_TOOLS_INIT_EVENT_TRACKER
constexpr unsigned long kEnableCounters = 60;    // UVM_TOOLS_ENABLE_COUNTERS
constexpr uint64_t kBytesToDeviceFlag = 0x1;     // UVM_COUNTER_NAME_FLAG_BYTES_XFER_HTD
constexpr uint64_t kBytesFromDeviceFlag = 0x2;   // UVM_COUNTER_NAME_FLAG_BYTES_XFER_DTH
constexpr int kBytesToDevice = 0;                // UvmCounterNameBytesXferHtD
constexpr int kBytesFromDevice = 1;              // UvmCounterNameBytesXferDtH
constexpr size_t kPage = 4096;

// UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS, with room after it: newer drivers
// add fields (a requested and granted event version) that stay zero here.
struct InitEventTracker {
  uint64_t queue_buffer = 0;       // 0 with a zero size: a counter tracker
  uint64_t queue_buffer_size = 0;
  uint64_t control_buffer = 0;     // the counters, a page the driver pins
  uint8_t processor[16] = {};      // unused with all_processors
  uint32_t all_processors = 1;
  uint32_t uvm_fd = 0;
  uint32_t status = 0;
  uint32_t reserved[13] = {};
};

struct EnableCounters {
  uint64_t flags = 0;
  uint32_t status = 0;
  uint32_t reserved[7] = {};
};

// The file descriptors through which this process's CUDA driver reaches
// UVM. The tracker needs the one that holds the address space, which the
// driver alone can tell, so each is tried.
std::vector<int> ProcessUvmFds() {
  std::vector<int> found;
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return found;
  while (dirent* entry = readdir(fds)) {
    char target[64] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t length = readlink(link.c_str(), target, sizeof(target) - 1);
    if (length > 0 && std::strcmp(target, "/dev/nvidia-uvm") == 0) {
      found.push_back(std::atoi(entry->d_name));
    }
  }
  closedir(fds);
  return found;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UvmToolsCounters>> UvmToolsCounters::Open() {
  const std::vector<int> uvm_fds = ProcessUvmFds();
  if (uvm_fds.empty()) {
    return absl::FailedPreconditionError(
        "UVM counters: this process has no /dev/nvidia-uvm open; start CUDA first");
  }
  const char* failed = "UVM_TOOLS_INIT_EVENT_TRACKER";
  int error = 0;
  uint32_t status = 0;
  for (int uvm_fd : uvm_fds) {
    // A tracker is bound to its tools file for good, so each try has a
    // file and a page of its own.
    const int tools_fd = open("/dev/nvidia-uvm-tools", O_RDWR | O_CLOEXEC);
    if (tools_fd < 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "UVM counters: cannot open /dev/nvidia-uvm-tools (%s)", std::strerror(errno)));
    }
    void* page = nullptr;
    if (posix_memalign(&page, kPage, kPage) != 0) {
      close(tools_fd);
      return absl::ResourceExhaustedError("UVM counters: no memory for the counter page");
    }
    std::memset(page, 0, kPage);
    InitEventTracker init;
    init.control_buffer = reinterpret_cast<uint64_t>(page);
    init.uvm_fd = static_cast<uint32_t>(uvm_fd);
    EnableCounters enable;
    enable.flags = kBytesToDeviceFlag | kBytesFromDeviceFlag;
    if (ioctl(tools_fd, kInitEventTracker, &init) != 0 || init.status != 0) {
      failed = "UVM_TOOLS_INIT_EVENT_TRACKER";
      error = errno;
      status = init.status;
    } else if (ioctl(tools_fd, kEnableCounters, &enable) != 0 || enable.status != 0) {
      failed = "UVM_TOOLS_ENABLE_COUNTERS";
      error = errno;
      status = enable.status;
    } else {
      return std::unique_ptr<UvmToolsCounters>(
          new UvmToolsCounters(tools_fd, static_cast<uint64_t*>(page)));
    }
    close(tools_fd);  // the driver lets go of the page with the file
    std::free(page);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "UVM counters: %s failed on every /dev/nvidia-uvm of the process (errno %d, status "
      "0x%x); this driver's tools interface differs from the one umlab knows",
      failed, error, status));
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
