// The unified-memory records CUPTI delivers: GPU page-fault groups, the
// bytes the driver moved each way and why, and the driver's thrashing
// detections and throttling. This is the cuda backend's fault stream.
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
  enum class Kind : uint8_t {
    kGpuPageFault,
    kBytesHostToDevice,
    kBytesDeviceToHost,
    kThrashing,   // the driver found a region bouncing between processors
    kThrottling,  // the driver held a processor's faults on a region back
    kBytesDeviceToDevice,  // between GPUs (a stream started for all devices)
    // One fault the driver serviced, from its own event queue
    // (uvm_event_queue.h): where CUPTI's fault record names one address of
    // a group, these name every fault.
    kFaultEvent,
  };
  // Why the driver moved bytes (CUPTI's migration cause, same numbering).
  enum class Cause : uint8_t {
    kUnknown = 0,
    kUser = 1,       // cudaMemPrefetchAsync: the engine's own prefetches and evictions
    kCoherence = 2,  // a fault needed the pages
    kPrefetch = 3,   // the driver's speculative prefetch (its tree prefetcher)
    kEviction = 4,   // the driver made room on a full device
    kAccessCounters = 5,
  };
  Kind kind;
  Cause cause = Cause::kUnknown;  // transfers only
  uint64_t address;   // device virtual address
  uint64_t value;     // faults in the group, or bytes (of a transfer or region)
  uint64_t start_ns;  // CUPTI timestamp
  uint64_t end_ns;    // transfers, faults (replay queued) and throttling; else 0
  // CUPTI's processor ids: a transfer's source and destination, a fault's
  // GPU (source). The host is an id of its own; it matters only when a
  // stream counts several GPUs.
  uint32_t source = 0;
  uint32_t destination = 0;
  // A fault event's: the driver's fault batch that serviced it.
  uint32_t batch = 0;
};

// When a kernel ran on the GPU (CUPTI's concurrent-kernel activity), named
// by the correlation id of the API call that launched it.
struct KernelRecord {
  uint32_t correlation = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// "fault", "h2d", ...: the names the record log uses.
const char* KindName(UnifiedMemoryRecord::Kind kind);
const char* CauseName(UnifiedMemoryRecord::Cause cause);

class CuptiFaultStream {
 public:
  // Needs a live CUDA context on `device` (CUPTI returns NOT_READY before).
  // Only one stream may exist at a time.
  // CUPTI fills buffers of `buffer_size` bytes and hands each over when it
  // is full or flushed.
  // `kernel_times` also collects every kernel's start and end (it costs a
  // little per launch; umlab torch --record needs it).
  // `all_devices` counts every GPU of the process instead of `device`'s, and
  // the transfers between GPUs too (umlab_cuda_cluster); where CUPTI cannot
  // count all devices at once, it falls back to counting each device.
  static absl::StatusOr<std::unique_ptr<CuptiFaultStream>> Start(int device,
                                                                 size_t buffer_size = 64 << 10,
                                                                 bool kernel_times = false,
                                                                 bool all_devices = false);
  ~CuptiFaultStream();

  // Asks CUPTI to hand over every completed buffer now; `forced` also the
  // buffers still being filled, with whatever records they hold.
  void Flush(bool forced = false);
  // Appends the records gathered so far to `out`.
  void Drain(std::vector<UnifiedMemoryRecord>& out);
  // Appends the kernel times gathered so far (with kernel_times) to `out`.
  void DrainKernels(std::vector<KernelRecord>& out);
  // Records CUPTI reports it lost (it drops them when faults are dense).
  uint64_t dropped() const;

  // CUPTI's clock, the one its records are stamped with.
  static uint64_t Timestamp();

 private:
  CuptiFaultStream() = default;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CUPTI_FAULT_STREAM_H_
