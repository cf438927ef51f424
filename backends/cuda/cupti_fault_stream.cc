#include "backends/cuda/cupti_fault_stream.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "absl/strings/str_format.h"

namespace umlab::cuda {
namespace {

// Small buffers: CUPTI hands a buffer over as soon as it is full, so records
// reach the engine without a flush, and a flush (about 2 ms on an H200) is
// needed only rarely. Set by Start.
std::atomic<size_t> buffer_bytes{64 << 10};

// CUPTI calls back into plain functions, so the gathered records live here.
std::mutex records_mutex;
std::vector<UnifiedMemoryRecord>* records = nullptr;
std::vector<KernelRecord>* kernels = nullptr;
std::atomic<bool> kernel_times_on{false};
std::atomic<uint64_t> dropped_records{0};
std::atomic<bool> active{false};

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  const size_t bytes = buffer_bytes.load();
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  *size = *buffer == nullptr ? 0 : bytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                              size_t /*size*/, size_t valid_size) {
  std::vector<UnifiedMemoryRecord> batch;
  std::vector<KernelRecord> kernel_batch;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      kernel_batch.push_back({kernel->correlationId, kernel->start, kernel->end});
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) continue;
    const auto* um = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
    UnifiedMemoryRecord out{};
    switch (um->counterKind) {
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
        out.kind = UnifiedMemoryRecord::Kind::kGpuPageFault;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
        out.kind = UnifiedMemoryRecord::Kind::kBytesHostToDevice;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
        out.kind = UnifiedMemoryRecord::Kind::kBytesDeviceToHost;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
        out.kind = UnifiedMemoryRecord::Kind::kThrashing;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
        out.kind = UnifiedMemoryRecord::Kind::kThrottling;
        break;
      case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD:
        out.kind = UnifiedMemoryRecord::Kind::kBytesDeviceToDevice;
        break;
      default:
        continue;
    }
    out.address = um->address;
    out.value = um->value;
    out.start_ns = um->start;
    out.source = um->srcId;
    out.destination = um->dstId;
    const bool transfer = out.kind == UnifiedMemoryRecord::Kind::kBytesHostToDevice ||
                          out.kind == UnifiedMemoryRecord::Kind::kBytesDeviceToHost ||
                          out.kind == UnifiedMemoryRecord::Kind::kBytesDeviceToDevice;
    if (transfer && um->flags <= CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_ACCESS_COUNTERS) {
      out.cause = static_cast<UnifiedMemoryRecord::Cause>(um->flags);
    }
    // CUPTI leaves `end` undefined for thrashing records.
    out.end_ns = out.kind == UnifiedMemoryRecord::Kind::kThrashing ? 0 : um->end;
    batch.push_back(out);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) {
    dropped_records += dropped;
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(records_mutex);
  if (records != nullptr) records->insert(records->end(), batch.begin(), batch.end());
  if (kernels != nullptr) kernels->insert(kernels->end(), kernel_batch.begin(), kernel_batch.end());
}

absl::Status Check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  return absl::FailedPreconditionError(absl::StrFormat(
      "CUPTI %s failed: %s; is the CUDA profiler available to this process?", what,
      message == nullptr ? "unknown error" : message));
}

}  // namespace

const char* KindName(UnifiedMemoryRecord::Kind kind) {
  switch (kind) {
    case UnifiedMemoryRecord::Kind::kGpuPageFault: return "fault";
    case UnifiedMemoryRecord::Kind::kBytesHostToDevice: return "h2d";
    case UnifiedMemoryRecord::Kind::kBytesDeviceToHost: return "d2h";
    case UnifiedMemoryRecord::Kind::kThrashing: return "thrashing";
    case UnifiedMemoryRecord::Kind::kThrottling: return "throttling";
    case UnifiedMemoryRecord::Kind::kBytesDeviceToDevice: return "d2d";
    case UnifiedMemoryRecord::Kind::kFaultEvent: return "fault_event";
  }
  return "unknown";
}

const char* CauseName(UnifiedMemoryRecord::Cause cause) {
  switch (cause) {
    case UnifiedMemoryRecord::Cause::kUnknown: return "";
    case UnifiedMemoryRecord::Cause::kUser: return "user";
    case UnifiedMemoryRecord::Cause::kCoherence: return "coherence";
    case UnifiedMemoryRecord::Cause::kPrefetch: return "prefetch";
    case UnifiedMemoryRecord::Cause::kEviction: return "eviction";
    case UnifiedMemoryRecord::Cause::kAccessCounters: return "access_counters";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<CuptiFaultStream>> CuptiFaultStream::Start(int device,
                                                                         size_t buffer_size,
                                                                         bool kernel_times,
                                                                         bool all_devices) {
  if (active.exchange(true)) {
    return absl::FailedPreconditionError("only one CUPTI fault stream may run at a time");
  }
  // aligned_alloc wants a multiple of the alignment.
  buffer_bytes = std::max<size_t>(4096, buffer_size / 8 * 8);
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    records = new std::vector<UnifiedMemoryRecord>();
    kernels = new std::vector<KernelRecord>();
  }
  dropped_records = 0;
  // The first three are what the backend needs; thrashing and throttling
  // tell what the driver's own heuristics did, and are left out where the
  // driver cannot report them. Transfers between GPUs only matter to a
  // stream for all devices.
  constexpr int kNeeded = 3, kSingle = 5, kAll = 6;
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[kAll] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOD};
  // The configurations to try, in order: one entry per kind for `devices`
  // devices under `scope` (deviceId is ignored for all devices).
  auto configure = [&](CUpti_ActivityUnifiedMemoryCounterScope scope, int kind_count,
                       const std::vector<int>& devices) {
    std::vector<CUpti_ActivityUnifiedMemoryCounterConfig> config;
    for (int id : devices) {
      for (int i = 0; i < kind_count; ++i) {
        CUpti_ActivityUnifiedMemoryCounterConfig entry = {};
        entry.scope = scope;
        entry.kind = kinds[i];
        entry.deviceId = static_cast<uint32_t>(id);
        entry.enable = 1;
        config.push_back(entry);
      }
    }
    return cuptiActivityConfigureUnifiedMemoryCounter(config.data(),
                                                      static_cast<uint32_t>(config.size()));
  };
  std::unique_ptr<CuptiFaultStream> stream(new CuptiFaultStream());
  absl::Status status = Check(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
                              "cuptiActivityRegisterCallbacks");
  if (status.ok()) {
    CUptiResult result = CUPTI_ERROR_UNKNOWN;
    if (all_devices) {
      int count = 0;
      if (cudaGetDeviceCount(&count) != cudaSuccess) count = 1;
      std::vector<int> every(count);
      for (int id = 0; id < count; ++id) every[id] = id;
      result = configure(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_ALL_DEVICES, kAll,
                         {device});
      if (result != CUPTI_SUCCESS) {
        result = configure(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
                           kAll, every);
      }
      if (result != CUPTI_SUCCESS) {
        result = configure(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
                           kNeeded, every);
      }
    } else {
      result = configure(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
                         kSingle, {device});
      if (result != CUPTI_SUCCESS) {
        result = configure(CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE,
                           kNeeded, {device});
      }
    }
    status = Check(result, "cuptiActivityConfigureUnifiedMemoryCounter");
  }
  if (status.ok()) {
    status = Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER),
                   "cuptiActivityEnable(UNIFIED_MEMORY_COUNTER)");
  }
  if (status.ok() && kernel_times) {
    status = Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                   "cuptiActivityEnable(CONCURRENT_KERNEL)");
    kernel_times_on = status.ok();
  }
  if (!status.ok()) return status;  // the destructor undoes the rest
  return stream;
}

CuptiFaultStream::~CuptiFaultStream() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (kernel_times_on.exchange(false)) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(records_mutex);
  delete records;
  records = nullptr;
  delete kernels;
  kernels = nullptr;
  active = false;
}

void CuptiFaultStream::Flush(bool forced) {
  cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

void CuptiFaultStream::Drain(std::vector<UnifiedMemoryRecord>& out) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (records == nullptr) return;
  out.insert(out.end(), records->begin(), records->end());
  records->clear();
}

void CuptiFaultStream::DrainKernels(std::vector<KernelRecord>& out) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (kernels == nullptr) return;
  out.insert(out.end(), kernels->begin(), kernels->end());
  kernels->clear();
}

uint64_t CuptiFaultStream::dropped() const { return dropped_records; }

uint64_t CuptiFaultStream::Timestamp() {
  uint64_t timestamp = 0;
  cuptiGetTimestamp(&timestamp);
  return timestamp;
}

}  // namespace umlab::cuda
