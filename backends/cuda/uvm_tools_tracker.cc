#include "backends/cuda/uvm_tools_tracker.h"

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

// UVM_TOOLS_INIT_EVENT_TRACKER_PARAMS (and its _V2, the same layout), with
// room after it for fields a newer driver may add.
struct InitEventTracker {
  uint64_t queue_buffer = 0;
  uint64_t queue_buffer_size = 0;  // entries; 0 makes a counter tracker
  uint64_t control_buffer = 0;
  uint8_t processor[16] = {};      // unused with all_processors
  uint32_t all_processors = 1;
  uint32_t uvm_fd = 0;
  uint32_t status = 0;
  uint32_t reserved[13] = {};
};

// UVM_TOOLS_EVENT_QUEUE_ENABLE_EVENTS_PARAMS and
// UVM_TOOLS_ENABLE_COUNTERS_PARAMS: a mask, then the status.
struct Subscribe {
  uint64_t flags = 0;
  uint32_t status = 0;
  uint32_t reserved[7] = {};
};

// The file descriptors through which this process's CUDA driver reaches
// UVM.
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

absl::StatusOr<UvmToolsTracker> OpenUvmToolsTracker(const UvmToolsTrackerSpec& spec) {
  const std::vector<int> uvm_fds = ProcessUvmFds();
  if (uvm_fds.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: this process has no /dev/nvidia-uvm open; start CUDA first", spec.what));
  }
  const char* failed = "UVM_TOOLS_INIT_EVENT_TRACKER";
  int error = 0;
  uint32_t status = 0;
  for (int uvm_fd : uvm_fds) {
    // A tracker is bound to its tools file for good, so each try has a
    // file of its own; closing a failed one lets go of the buffers.
    const int tools_fd = open("/dev/nvidia-uvm-tools", O_RDWR | O_CLOEXEC);
    if (tools_fd < 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: cannot open /dev/nvidia-uvm-tools (%s)", spec.what, std::strerror(errno)));
    }
    InitEventTracker init;
    init.queue_buffer = reinterpret_cast<uint64_t>(spec.queue);
    init.queue_buffer_size = spec.queue_entries;
    init.control_buffer = reinterpret_cast<uint64_t>(spec.control);
    init.uvm_fd = static_cast<uint32_t>(uvm_fd);
    Subscribe subscribe;
    subscribe.flags = spec.subscribe_flags;
    if (ioctl(tools_fd, spec.init_ioctl, &init) != 0 || init.status != 0) {
      failed = "UVM_TOOLS_INIT_EVENT_TRACKER";
      error = errno;
      status = init.status;
    } else if (ioctl(tools_fd, spec.subscribe_ioctl, &subscribe) != 0 || subscribe.status != 0) {
      failed = "subscribing";
      error = errno;
      status = subscribe.status;
    } else {
      return UvmToolsTracker{tools_fd, uvm_fd};
    }
    close(tools_fd);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: %s failed on every /dev/nvidia-uvm of the process (errno %d, status 0x%x); this "
      "driver's tools interface differs from the one umlab knows",
      spec.what, failed, error, status));
}

}  // namespace umlab::cuda
