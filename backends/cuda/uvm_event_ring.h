// The ring of events an event queue on the UVM tools device shares with the
// UVM driver, read from the consumer's side: the driver writes events and
// moves its put index; the reader takes the events up to it, turns the
// migrations into transfer records and the GPU faults it serviced into
// fault events, and moves its get index so that the driver has room again.
// When the ring is full the driver drops the event and counts it in the
// control block.
//
// The layouts are the driver's (NVIDIA open kernel modules, kernel-open/
// nvidia-uvm/uvm_types.h: UvmToolsEventControlData and UvmEventEntry_V2,
// whose first member is UvmEventMigrationInfo_V2 for a migration and
// UvmEventGpuFaultInfo_V2 for a GPU fault).
#ifndef UMLAB_BACKENDS_CUDA_UVM_EVENT_RING_H_
#define UMLAB_BACKENDS_CUDA_UVM_EVENT_RING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/cupti_fault_stream.h"

namespace umlab::cuda {

// UvmToolsEventControlData.
struct UvmEventControl {
  uint32_t get_ahead;  // the reader's
  uint32_t get_behind;
  uint32_t put_ahead;  // the driver's
  uint32_t put_behind;
  uint64_t dropped[64];  // per event type
};
static_assert(sizeof(UvmEventControl) == 528);

inline constexpr size_t kUvmEventBytes = 72;  // sizeof(UvmEventEntry_V2)
inline constexpr uint8_t kUvmMigrationEvent = 2;  // UvmEventTypeMigration
inline constexpr uint8_t kUvmGpuFaultEvent = 3;   // UvmEventTypeGpuFault

class UvmEventRing {
 public:
  // `entries`: a power of two; the ring is entries * kUvmEventBytes.
  UvmEventRing(const unsigned char* events, uint32_t entries, UvmEventControl* control)
      : events_(events), mask_(entries - 1), control_(control) {}

  // Appends the migrations written so far as transfer records, and the GPU
  // faults as fault events (kFaultEvent), their times on the records'
  // clock: `gpu_to_records_ns` is added to the GPU's. Other events are
  // passed over. One thread at a time.
  void Drain(std::vector<UnifiedMemoryRecord>& out, uint64_t gpu_to_records_ns);
  // Migrations and GPU faults the driver dropped because the ring was full.
  uint64_t dropped_events() const;

 private:
  const unsigned char* events_;
  uint32_t mask_;
  UvmEventControl* control_;
  uint32_t next_ = 0;  // the next event to read
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_UVM_EVENT_RING_H_
