#include "backends/cuda/torch/launch_observer.h"

#include <cuda.h>
#include <cupti.h>

#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/torch/managed_pool.h"
#include "core/execution_id.h"

namespace umlab::cuda {
namespace {

// CUPTI calls back into a plain function; its state lives here.
struct ObserverState {
  std::mutex mutex;
  CUpti_SubscriberHandle subscriber = nullptr;
  ExecutionIdTable table;
  ExecutionIdTable tensor_table;
  std::vector<uint32_t> tensor_sequence;
  // Each kernel's parameters (offset, size), asked of the driver once.
  absl::flat_hash_map<CUfunction, std::vector<std::pair<size_t, size_t>>> layouts;
  std::vector<uint32_t> sequence;
  LaunchCounts counts;
  std::vector<uint8_t> scratch;
  std::vector<uint64_t> word_scratch;
  // Stream stamps: host-mapped words the GPU writes (begun, ended).
  uint64_t* stamps = nullptr;
  CUdeviceptr device_stamps = 0;
  // Each launch's CUPTI correlation ids: the driver call's, and the runtime
  // call's it was made from (0 for none). A kernel's activity record
  // carries one of them.
  std::vector<std::pair<uint32_t, uint32_t>> correlations;
  LaunchListener listener = nullptr;
  void* listener_context = nullptr;
};
ObserverState* state = nullptr;
// The sequence number of the launch this thread is making, between its
// API enter and exit.
thread_local uint64_t launching = 0;
// The correlation id of the runtime launch call this thread is in, if any.
thread_local uint32_t runtime_correlation = 0;

// Where `function`'s parameters lie in its argument buffer (offset, size),
// or an empty list where the driver cannot say (CUDA before 12.4). The
// runtime launches through context-independent kernels (CUkernel) passed
// where a CUfunction goes, which
// cuFuncGetParamInfo rejects: those are asked of cuKernelGetParamInfo (run
// 14: every runtime launch of a PyTorch training was one).
const std::vector<std::pair<size_t, size_t>>& LayoutOf(CUfunction function) {
  auto [it, inserted] = state->layouts.try_emplace(function);
  if (inserted) {
    for (size_t index = 0;; ++index) {
      size_t offset = 0, size = 0;
      if (cuFuncGetParamInfo(function, index, &offset, &size) != CUDA_SUCCESS &&
          cuKernelGetParamInfo(reinterpret_cast<CUkernel>(function), index, &offset, &size) !=
              CUDA_SUCCESS) {
        break;
      }
      it->second.emplace_back(offset, size);
    }
  }
  return it->second;
}

// The argument bytes of one launch, each parameter at its offset in the
// kernel's argument buffer (so a pointer after a 4-byte int stays 8-byte
// aligned, as the kernel sees it), from kernelParams (one pointer per
// parameter) or from the packed buffer of `extra`.
absl::Span<const uint8_t> ArgumentBytes(CUfunction function, void** params, void** extra) {
  std::vector<uint8_t>& bytes = state->scratch;
  bytes.clear();
  if (params != nullptr) {
    const std::vector<std::pair<size_t, size_t>>& layout = LayoutOf(function);
    if (layout.empty()) ++state->counts.unsized_launches;
    for (size_t i = 0; i < layout.size(); ++i) {
      const auto [offset, size] = layout[i];
      if (bytes.size() < offset + size) bytes.resize(offset + size, 0);
      std::memcpy(bytes.data() + offset, params[i], size);
    }
  } else if (extra != nullptr) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t*>(extra[i + 1]);
    }
    if (buffer != nullptr) {
      const auto* begin = static_cast<const uint8_t*>(buffer);
      bytes.assign(begin, begin + size);
    }
  }
  return bytes;
}

// Returns the launch's sequence number (1-based).
uint64_t Observe(const char* name, CUfunction function, const std::array<uint32_t, 3>& grid,
                 const std::array<uint32_t, 3>& block, uint32_t shared, void** params,
                 void** extra, uint32_t correlation) {
  std::lock_guard<std::mutex> lock(state->mutex);
  KernelLaunch launch;
  launch.kernel_name = name == nullptr ? "" : name;
  launch.grid = grid;
  launch.block = block;
  launch.shared_bytes = shared;
  launch.argument_bytes = ArgumentBytes(function, params, extra);
  state->sequence.push_back(state->table.IdOf(launch));
  // The same launch named by its tensors: the 8-byte-aligned argument
  // words that point into live managed memory.
  std::vector<uint64_t>& words = state->word_scratch;
  words.clear();
  const absl::Span<const uint8_t> bytes = launch.argument_bytes;
  for (size_t offset = 0; offset + 8 <= bytes.size(); offset += 8) {
    uint64_t word = 0;
    std::memcpy(&word, bytes.data() + offset, 8);
    if (InManagedSegment(word)) words.push_back(word);
  }
  // The words' own bytes, as they sat in the argument buffer.
  launch.argument_bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(words.data()),
                                              words.size() * sizeof(uint64_t));
  state->tensor_sequence.push_back(state->tensor_table.IdOf(launch));
  state->correlations.emplace_back(correlation, runtime_correlation);
  ++state->counts.launches;
  if (state->listener != nullptr) {
    const absl::string_view kernel_name(launch.kernel_name.data(), launch.kernel_name.size());
    state->listener(state->listener_context, state->sequence.back(), kernel_name, words.data(),
                    words.size());
  }
  return state->sequence.size();
}

// Writes `value` to stamp `which` (0: begun, 1: ended) when `stream` gets
// there. The per-thread default stream of a _ptsz launch is named as such.
void Stamp(CUstream stream, bool per_thread, int which, uint64_t value) {
  if (state->stamps == nullptr) return;
  if (stream == nullptr && per_thread) stream = CU_STREAM_PER_THREAD;
  if (cuStreamWriteValue64(stream, state->device_stamps + which * sizeof(uint64_t), value,
                           CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lock(state->mutex);
    ++state->counts.unstamped_launches;
  }
}

void CUPTIAPI OnCallback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                         const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (info->callbackSite != CUPTI_API_ENTER) {
      runtime_correlation = 0;
      return;
    }
    runtime_correlation = info->correlationId;
    std::lock_guard<std::mutex> lock(state->mutex);
    ++state->counts.runtime_launches;
    return;
  }
  const bool per_thread = id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
                          id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz;
  CUstream stream = nullptr;
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      const auto* p = static_cast<const cuLaunchKernel_params*>(info->functionParams);
      stream = p->hStream;
      if (info->callbackSite == CUPTI_API_ENTER) {
        launching = Observe(info->symbolName, p->f, {p->gridDimX, p->gridDimY, p->gridDimZ},
                            {p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes,
                            p->kernelParams, p->extra, info->correlationId);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const auto* p = static_cast<const cuLaunchKernelEx_params*>(info->functionParams);
      const CUlaunchConfig& c = *p->config;
      stream = c.hStream;
      if (info->callbackSite == CUPTI_API_ENTER) {
        launching = Observe(info->symbolName, p->f, {c.gridDimX, c.gridDimY, c.gridDimZ},
                            {c.blockDimX, c.blockDimY, c.blockDimZ}, c.sharedMemBytes,
                            p->kernelParams, p->extra, info->correlationId);
      }
      break;
    }
    default:
      return;
  }
  // Before the kernel in its stream: it has begun when the GPU writes this.
  // After it: it has ended.
  Stamp(stream, per_thread, info->callbackSite == CUPTI_API_ENTER ? 0 : 1, launching);
}

absl::Status Check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  return absl::InternalError(absl::StrFormat("%s failed: %s", what, message ? message : "?"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LaunchObserver>> LaunchObserver::Start(bool stream_stamps) {
  if (state != nullptr) return absl::FailedPreconditionError("a launch observer already runs");
  state = new ObserverState();
  std::unique_ptr<LaunchObserver> observer(new LaunchObserver());
  if (stream_stamps) {
    void* stamps = nullptr;
    if (cuMemHostAlloc(&stamps, 2 * sizeof(uint64_t), CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS ||
        cuMemHostGetDevicePointer(&state->device_stamps, stamps, 0) != CUDA_SUCCESS) {
      if (stamps != nullptr) cuMemFreeHost(stamps);
      return absl::InternalError(
          "umlab_torch: cannot map host memory for the kernels' stream stamps");
    }
    state->stamps = static_cast<uint64_t*>(stamps);
    state->stamps[0] = state->stamps[1] = 0;
  }
  absl::Status status = Check(cuptiSubscribe(&state->subscriber, OnCallback, nullptr),
                              "cuptiSubscribe (is a profiler attached?)");
  const CUpti_CallbackId driver_ids[] = {
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};
  for (CUpti_CallbackId id : driver_ids) {
    if (!status.ok()) break;
    status = Check(cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id),
                   "cuptiEnableCallback");
  }
  const CUpti_CallbackId runtime_ids[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                          CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060};
  for (CUpti_CallbackId id : runtime_ids) {
    if (!status.ok()) break;
    status = Check(cuptiEnableCallback(1, state->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id),
                   "cuptiEnableCallback");
  }
  if (!status.ok()) return status;  // the destructor unsubscribes
  return observer;
}

LaunchObserver::~LaunchObserver() {
  if (state == nullptr) return;
  if (state->subscriber != nullptr) cuptiUnsubscribe(state->subscriber);
  // Stamps may still be on their way from queued work: let it finish first.
  if (state->stamps != nullptr) {
    cuCtxSynchronize();
    cuMemFreeHost(state->stamps);
  }
  delete state;
  state = nullptr;
}

LaunchCounts LaunchObserver::counts() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  LaunchCounts counts = state->counts;
  counts.execution_ids = state->table.size();
  counts.tensor_execution_ids = state->tensor_table.size();
  return counts;
}

std::vector<uint32_t> LaunchObserver::tensor_sequence() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->tensor_sequence;
}

uint64_t LaunchObserver::begun() const {
  return state->stamps == nullptr ? 0 : *static_cast<volatile uint64_t*>(&state->stamps[0]);
}

uint64_t LaunchObserver::ended() const {
  return state->stamps == nullptr ? 0 : *static_cast<volatile uint64_t*>(&state->stamps[1]);
}

std::vector<std::pair<uint32_t, uint32_t>> LaunchObserver::correlations() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->correlations;
}

void LaunchObserver::SetListener(LaunchListener listener, void* context) {
  std::lock_guard<std::mutex> lock(state->mutex);
  state->listener = listener;
  state->listener_context = context;
}

uint32_t LaunchObserver::ExecutionIdOf(uint64_t sequence_number) const {
  std::lock_guard<std::mutex> lock(state->mutex);
  if (sequence_number == 0 || sequence_number > state->sequence.size()) return 0;
  return state->sequence[sequence_number - 1];
}

std::vector<uint32_t> LaunchObserver::sequence() const {
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->sequence;
}

}  // namespace umlab::cuda
