// The unified-memory records CUPTI delivers: GPU page-fault groups and the
// bytes the driver moved each way. This is the cuda backend's fault stream.
//
// CUPTI's activity API is process-global and hands over records in buffers
// from its own thread; the stream gathers them under a lock and the
// backend drains them from its polling loop.
#ifndef UMLAB_BACKENDS_CUDA_CUPTI_FAULT_STREAM_H_
#define UMLAB_BACKENDS_CUDA_CUPTI_FAULT_STREAM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace umlab::cuda {

struct UnifiedMemoryRecord {
  enum class Kind : uint8_t { kGpuPageFault, kBytesHostToDevice, kBytesDeviceToHost };
  Kind kind;
  uint64_t address;   // device virtual address
  uint64_t value;     // faults in the group, or bytes moved
  uint64_t start_ns;  // CUPTI timestamp
};

class CuptiFaultStream {
 public:
  // Needs a live CUDA context on `device` (CUPTI returns NOT_READY before).
  // Only one stream may exist at a time.
  static absl::StatusOr<std::unique_ptr<CuptiFaultStream>> Start(int device);
  ~CuptiFaultStream();

  // Asks CUPTI to hand over every completed buffer now.
  void Flush();
  // Appends the records gathered so far to `out`.
  void Drain(std::vector<UnifiedMemoryRecord>& out);
  // Records CUPTI reports it lost (it drops them when faults are dense).
  uint64_t dropped() const;

  // CUPTI's clock, the one its records are stamped with.
  static uint64_t Timestamp();

 private:
  CuptiFaultStream() = default;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CUPTI_FAULT_STREAM_H_
