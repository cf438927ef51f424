// The UVM driver's own byte counters for this process: every migration it
// makes adds its bytes, host-to-device or device-to-host, as it makes it.
//
// CUPTI's records are built from the driver's tools events, and the driver
// drops some of them, most likely when CUPTI's queue is full
// (docs/fidelity.md, "CUPTI's missing write-backs"); the counters are added
// to at the same place in the driver (uvm_tools.c, where a migration is
// recorded) but are sums kept in a page the driver writes directly, with no
// queue to overflow. They are read
// through the UVM tools device (/dev/nvidia-uvm-tools), as a tools client
// reads them, with the process's own /dev/nvidia-uvm file.
//
// Linux only, and only where the tools device can be opened; Open says why
// not in one line otherwise.
#ifndef UMLAB_BACKENDS_CUDA_UVM_TOOLS_COUNTERS_H_
#define UMLAB_BACKENDS_CUDA_UVM_TOOLS_COUNTERS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace umlab::cuda {

class UvmToolsCounters {
 public:
  struct Bytes {
    uint64_t to_device = 0;
    uint64_t from_device = 0;
  };

  // Needs CUDA to have opened the UVM device already (a live context).
  static absl::StatusOr<std::unique_ptr<UvmToolsCounters>> Open();
  ~UvmToolsCounters();
  UvmToolsCounters(const UvmToolsCounters&) = delete;
  UvmToolsCounters& operator=(const UvmToolsCounters&) = delete;

  // The counts so far, over every processor; take differences.
  Bytes Read() const;

 private:
  UvmToolsCounters(int tools_fd, uint64_t* counters) : tools_fd_(tools_fd), counters_(counters) {}

  int tools_fd_;
  uint64_t* counters_;  // one page, written by the driver
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_UVM_TOOLS_COUNTERS_H_
