#include "backends/cuda/uvm_event_ring.h"

#include <cstring>

namespace umlab::cuda {
namespace {

// UvmEventMigrationInfo_V2; the driver pads it by hand so that these
// offsets hold whatever the compiler.
struct MigrationEvent {
  uint8_t event_type;
  uint8_t cause;  // UvmEventMigrationCause: CUPTI's numbering
  uint16_t padding;
  uint16_t source;  // processor index; the CPU is 0
  uint16_t destination;
  int32_t source_node;
  int32_t destination_node;
  uint64_t address;
  uint64_t bytes;
  uint64_t begin_cpu;
  uint64_t end_cpu;
  uint64_t range_group;
  uint64_t begin_gpu;  // on the GPU's clock, as the copy began and ended
  uint64_t end_gpu;
};
static_assert(sizeof(MigrationEvent) == kUvmEventBytes);
static_assert(offsetof(MigrationEvent, address) == 16);
static_assert(offsetof(MigrationEvent, begin_gpu) == 56);

// UvmEventGpuFaultInfo_V2: one fault entry the driver serviced (or merged
// into one it serviced), written as its batch's service began.
struct GpuFaultEvent {
  uint8_t event_type;
  uint8_t fault_type;
  uint16_t gpu;
  uint16_t gpc;
  uint16_t client;
  uint64_t address;
  uint64_t service_cpu;  // when the CPU began servicing it
  uint64_t written_gpu;  // when the GPU wrote it into the fault buffer
  uint32_t batch;
  uint8_t client_type;
  uint8_t access_type;
  uint16_t padding;
};
static_assert(sizeof(GpuFaultEvent) <= kUvmEventBytes);
static_assert(offsetof(GpuFaultEvent, address) == 8);
static_assert(offsetof(GpuFaultEvent, written_gpu) == 24);
static_assert(offsetof(GpuFaultEvent, batch) == 32);

constexpr uint16_t kHostIndex = 0;  // the CPU's processor index

UnifiedMemoryRecord::Kind KindOf(const MigrationEvent& event) {
  if (event.source == kHostIndex) return UnifiedMemoryRecord::Kind::kBytesHostToDevice;
  if (event.destination == kHostIndex) return UnifiedMemoryRecord::Kind::kBytesDeviceToHost;
  return UnifiedMemoryRecord::Kind::kBytesDeviceToDevice;
}

}  // namespace

void UvmEventRing::Drain(std::vector<UnifiedMemoryRecord>& out, uint64_t gpu_to_records_ns) {
  // The driver writes an event, then moves put_behind past it.
  const uint32_t put = __atomic_load_n(&control_->put_behind, __ATOMIC_ACQUIRE) & mask_;
  while (next_ != put) {
    const unsigned char* entry = events_ + size_t{next_} * kUvmEventBytes;
    next_ = (next_ + 1) & mask_;
    if (entry[0] == kUvmGpuFaultEvent) {
      GpuFaultEvent fault;
      std::memcpy(&fault, entry, sizeof(fault));
      UnifiedMemoryRecord record;
      record.kind = UnifiedMemoryRecord::Kind::kFaultEvent;
      record.address = fault.address;
      record.value = 1;
      // When the fault was raised, on the clock of the migrations it
      // causes: sorted by it, a poll's faults come in the order the GPU
      // raised them, not in the address order the driver serviced them.
      record.start_ns = fault.written_gpu + gpu_to_records_ns;
      record.end_ns = 0;
      record.source = fault.gpu;
      record.batch = fault.batch;
      out.push_back(record);
      continue;
    }
    if (entry[0] != kUvmMigrationEvent) continue;
    MigrationEvent event;
    std::memcpy(&event, entry, sizeof(event));
    UnifiedMemoryRecord record;
    record.kind = KindOf(event);
    record.cause = static_cast<UnifiedMemoryRecord::Cause>(event.cause);
    record.address = event.address;
    record.value = event.bytes;
    record.start_ns = event.begin_gpu + gpu_to_records_ns;
    record.end_ns = event.end_gpu + gpu_to_records_ns;
    record.source = event.source;
    record.destination = event.destination;
    out.push_back(record);
  }
  // The driver reads get_behind to know the room it has.
  __atomic_store_n(&control_->get_ahead, next_, __ATOMIC_RELEASE);
  __atomic_store_n(&control_->get_behind, next_, __ATOMIC_RELEASE);
}

uint64_t UvmEventRing::dropped_events() const {
  return __atomic_load_n(&control_->dropped[kUvmMigrationEvent], __ATOMIC_RELAXED) +
         __atomic_load_n(&control_->dropped[kUvmGpuFaultEvent], __ATOMIC_RELAXED);
}

}  // namespace umlab::cuda
