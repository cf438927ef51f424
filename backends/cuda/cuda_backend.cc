#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "backends/cuda/touch_kernel.h"
#include "core/backend_registry.h"
#include "core/kernel_assembler.h"

namespace umlab::cuda {
namespace {

absl::Status CudaCheck(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s", what, cudaGetErrorString(error)));
}

// Managed memory the backend leaves free for the driver's own use.
constexpr double kUsableFreeFraction = 0.85;

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const DeviceConfig& device,
                                                                 uint64_t capacity_frames,
                                                                 const CudaOptions& options) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no CUDA device is visible (%s); the cuda backend needs a GPU, use --backend=sim",
        error == cudaSuccess ? "none found" : cudaGetErrorString(error)));
  }
  if (options.gpu < 0 || options.gpu >= count) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gpu=%d, but %d CUDA devices are visible", options.gpu, count));
  }
  if (absl::Status s = CudaCheck(cudaSetDevice(options.gpu), "cudaSetDevice"); !s.ok()) return s;
  int managed = 0;
  cudaDeviceGetAttribute(&managed, cudaDevAttrConcurrentManagedAccess, options.gpu);
  if (!managed) {
    return absl::FailedPreconditionError(
        "this GPU cannot fault on managed memory (no concurrent managed access); "
        "the cuda backend needs a Pascal or newer GPU on Linux");
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, options.gpu);
  cudaFree(nullptr);  // creates the context CUPTI needs
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CudaBackend> backend(new CudaBackend(
      device, capacity_frames, options, prop.multiProcessorCount,
      static_cast<uint64_t>(static_cast<double>(free_bytes) * kUsableFreeFraction)));
  if (absl::Status s = backend->Initialise(); !s.ok()) return s;
  return backend;
}

CudaBackend::CudaBackend(const DeviceConfig& device, uint64_t capacity_frames,
                         const CudaOptions& options, int sm_count, uint64_t memory_limit)
    : device_(device),
      options_(options),
      capacity_frames_(capacity_frames),
      sm_count_(sm_count),
      segments_(memory_limit),
      // The GPU's own fault buffer is not ours to model here: this one only
      // carries records to the engine, and must not drop any.
      faults_(size_t{1} << 20),
      start_(std::chrono::steady_clock::now()) {}

absl::Status CudaBackend::Initialise() {
  if (absl::Status s = CudaCheck(cudaStreamCreateWithFlags(&compute_stream_, cudaStreamNonBlocking),
                                 "cudaStreamCreate");
      !s.ok()) {
    return s;
  }
  return CudaCheck(cudaStreamCreateWithFlags(&migration_stream_, cudaStreamNonBlocking),
                   "cudaStreamCreate");
}

CudaBackend::~CudaBackend() {
  if (compute_stream_ != nullptr) cudaStreamSynchronize(compute_stream_);
  if (migration_stream_ != nullptr) cudaStreamSynchronize(migration_stream_);
  cupti_.reset();
  for (PendingTransfer& pending : pending_) cudaEventDestroy(pending.done);
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
  if (device_pages_ != nullptr) cudaFree(device_pages_);
  if (pinned_pages_ != nullptr) cudaFreeHost(pinned_pages_);
  if (compute_stream_ != nullptr) cudaStreamDestroy(compute_stream_);
  if (migration_stream_ != nullptr) cudaStreamDestroy(migration_stream_);
}

Nanos CudaBackend::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

// ---------------------------------------------------------------------------
// Running the program.

absl::Status CudaBackend::Run(EventSource& program, Engine& engine, EventSink* recorder) {
  engine_ = &engine;
  recorder_ = recorder;
  absl::StatusOr<std::unique_ptr<CuptiFaultStream>> cupti = CuptiFaultStream::Start(options_.gpu);
  if (!cupti.ok()) return cupti.status();
  cupti_ = std::move(*cupti);
  cupti_start_ = CuptiFaultStream::Timestamp();
  start_ = std::chrono::steady_clock::now();
  bins_.assign(1, Bin{});

  KernelAssembler assembler(program);
  while (assembler.Next()) {
    if (assembler.is_kernel()) {
      if (recorder_ != nullptr) {
        for (const Event& event : assembler.kernel_events()) recorder_->Record(event);
      }
      ranges_.clear();
      for (const Event& access : assembler.accesses()) {
        ranges_.push_back(
            AccessRange{access.address, access.size, access.access != AccessType::kRead});
      }
      const Event& begin = assembler.kernel_begin();
      current_exec_id_ = begin.exec_id;
      if (absl::Status s = ExecuteKernel(begin, assembler.kernel_end()); !s.ok()) return s;
      current_exec_id_ = 0;
      if (!error_.ok()) return error_;
      continue;
    }
    const Event& event = assembler.event();
    if (recorder_ != nullptr) recorder_->Record(event);
    switch (event.kind) {
      case EventKind::kAlloc:
        if (absl::Status s = segments_.Reserve(event.address, event.size); !s.ok()) return s;
        engine.OnProgramEvent(event);
        break;
      case EventKind::kFree:
        engine.OnProgramEvent(event);
        // The engine's discards of the segment must land before it goes.
        cudaStreamSynchronize(migration_stream_);
        if (absl::Status s = segments_.Release(event.address); !s.ok()) return s;
        break;
      case EventKind::kIterationBegin:
        iteration_starts_.push_back(CuptiFaultStream::Timestamp());
        bins_.push_back(Bin{});
        engine.OnProgramEvent(event);
        break;
      default:
        engine.OnProgramEvent(event);
        break;
    }
    if (!error_.ok()) return error_;
  }
  if (!assembler.status().ok()) return assembler.status();
  cudaStreamSynchronize(migration_stream_);
  // Hand every outstanding record over, then account for it.
  if (absl::Status s = Poll(/*flush=*/true); !s.ok()) return s;
  engine.Finish();
  FillStatistics();
  return error_;
}

absl::Status CudaBackend::UploadPages(uint64_t count) {
  if (count > page_buffer_entries_) {
    if (device_pages_ != nullptr) cudaFree(device_pages_);
    if (pinned_pages_ != nullptr) cudaFreeHost(pinned_pages_);
    device_pages_ = nullptr;
    pinned_pages_ = nullptr;
    page_buffer_entries_ = std::max<uint64_t>(count, 2 * page_buffer_entries_);
    if (absl::Status s = CudaCheck(
            cudaMalloc(reinterpret_cast<void**>(&device_pages_), page_buffer_entries_ * sizeof(uint64_t)), "cudaMalloc");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CudaCheck(
            cudaMallocHost(reinterpret_cast<void**>(&pinned_pages_), page_buffer_entries_ * sizeof(uint64_t)),
            "cudaMallocHost");
        !s.ok()) {
      return s;
    }
  }
  std::memcpy(pinned_pages_, host_pages_.data(), count * sizeof(uint64_t));
  return CudaCheck(cudaMemcpyAsync(device_pages_, pinned_pages_, count * sizeof(uint64_t),
                                   cudaMemcpyHostToDevice, compute_stream_),
                   "cudaMemcpyAsync");
}

absl::Status CudaBackend::ExecuteKernel(const Event& begin, const Event& end) {
  host_pages_.clear();
  for (const AccessRange& range : ranges_) {
    if (range.size == 0) continue;
    const uint64_t first = PageOfAddress(range.address);
    const uint64_t pages = PagesSpanned(range.address, range.size);
    for (uint64_t page = first; page < first + pages; ++page) {
      const uint64_t device = segments_.ToDevice(page * kPageSize);
      if (device == 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "malformed program: kernel %d touches %#x, outside every reserved segment",
            begin.exec_id, page * kPageSize));
      }
      host_pages_.push_back(device | (range.write ? 1 : 0));
    }
  }
  if (absl::Status s = UploadPages(host_pages_.size()); !s.ok()) return s;
  // The copy of the page list must not stall on the previous kernel's
  // spin: it shares the stream, so it simply runs first.
  engine_->OnProgramEvent(begin);
  if (absl::Status s = Poll(false); !s.ok()) return s;

  const uint64_t count = host_pages_.size();
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(sm_count_, count));
  const uint64_t per_access_ns =
      count == 0 ? 0 : static_cast<uint64_t>(begin.duration_ns) * blocks / count;
  cudaEvent_t done = nullptr;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (count == 0) {
    // A kernel with no accesses only computes: wait out its time on the host.
    std::this_thread::sleep_for(std::chrono::nanoseconds(begin.duration_ns));
  } else if (absl::Status s = CudaCheck(
                 LaunchTouchKernel(device_pages_, count, blocks, per_access_ns, compute_stream_),
                 "kernel launch");
             !s.ok()) {
    cudaEventDestroy(done);
    return s;
  }
  cudaEventRecord(done, compute_stream_);
  while (cudaEventQuery(done) == cudaErrorNotReady) {
    if (absl::Status s = Poll(false); !s.ok()) {
      cudaEventDestroy(done);
      return s;
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(options_.poll_interval_ns));
  }
  const cudaError_t kernel_error = cudaEventSynchronize(done);
  cudaEventDestroy(done);
  if (absl::Status s = CudaCheck(kernel_error, "kernel"); !s.ok()) return s;
  end_of_last_kernel_ns_ = Now();
  if (absl::Status s = Poll(false); !s.ok()) return s;
  engine_->OnProgramEvent(end);
  return error_;
}

size_t CudaBackend::IterationOf(uint64_t cupti_timestamp) const {
  // Bin 0 holds what happened before the first iteration marker.
  return static_cast<size_t>(std::upper_bound(iteration_starts_.begin(),
                                              iteration_starts_.end(), cupti_timestamp) -
                             iteration_starts_.begin());
}

absl::Status CudaBackend::Poll(bool flush) {
  const Nanos now = Now();
  if (flush || now - last_flush_ns_ >= options_.flush_interval_ns) {
    cupti_->Flush();
    last_flush_ns_ = now;
  }
  records_.clear();
  cupti_->Drain(records_);
  absl::flat_hash_set<BlockNumber> arriving;
  for (const UnifiedMemoryRecord& record : records_) {
    Bin& bin = bins_[std::min(IterationOf(record.start_ns), bins_.size() - 1)];
    switch (record.kind) {
      case UnifiedMemoryRecord::Kind::kBytesHostToDevice:
        bin.h2d += record.value;
        continue;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToHost:
        bin.d2h += record.value;
        continue;
      case UnifiedMemoryRecord::Kind::kGpuPageFault:
        break;
    }
    const std::optional<uint64_t> address = segments_.ToProgram(record.address);
    if (!address.has_value()) continue;  // not the program's memory
    ++fault_records_;
    bin.faults += record.value;
    // A record names one faulting address of a group, and the driver's own
    // prefetcher populates around it, often the whole 2 MB block. So that
    // the engine's residency (and with it the budget and what an eviction
    // moves back) covers what the driver really brought in, every page of
    // the block is reported as faulted. CUPTI does not say which SM faulted
    // or whether it wrote.
    const PageNumber first = FirstPageOfBlock(BlockOfAddress(*address));
    for (int page = 0; page < kPagesPerBlock; ++page) {
      faults_.Push(FaultEntry{first + page, AccessType::kRead, 0, current_exec_id_, now});
    }
    const BlockState* state = engine_->memory_state().Find(BlockOfAddress(*address));
    if (state == nullptr || !state->has_frame) arriving.insert(BlockOfAddress(*address));
    if (recorder_ != nullptr) {
      Event fault;
      fault.kind = EventKind::kFault;
      fault.address = PageOfAddress(*address) * kPageSize;
      fault.time_ns = static_cast<Nanos>(record.start_ns - cupti_start_);
      recorder_->Record(fault);
    }
  }
  // The driver has already made these blocks resident: until the engine
  // evicts, residency exceeds the budget by whatever does not fit.
  if (!arriving.empty() && capacity_frames_ < UINT64_MAX / 4) {
    const uint64_t resident = engine_->memory_state().used_frames() + arriving.size();
    const uint64_t over = resident > capacity_frames_ ? resident - capacity_frames_ : 0;
    overshoot_max_frames_ = std::max(overshoot_max_frames_, over);
    overshoot_sum_frames_ += over;
    ++overshoot_samples_;
  }
  if (!faults_.empty()) engine_->ServiceFaults();
  DeliverCompletions();
  return error_;
}

void CudaBackend::DeliverCompletions() {
  bool progress = true;
  while (progress) {
    progress = false;
    while (!completed_now_.empty()) {
      std::vector<TransferId> done;
      done.swap(completed_now_);
      for (TransferId id : done) listener_->OnTransferComplete(id);
      progress = true;
    }
    while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
      const PendingTransfer finished = pending_.front();
      pending_.pop_front();
      spare_events_.push_back(finished.done);
      listener_->OnTransferComplete(finished.id);
      progress = true;
    }
    if (!faults_.empty() && !engine_->servicing()) {
      engine_->ServiceFaults();
      progress = progress || !completed_now_.empty();
    }
  }
}

// ---------------------------------------------------------------------------
// Data movement.

void CudaBackend::Fence(TransferId id) {
  cudaEvent_t event = nullptr;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else {
    cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  }
  cudaEventRecord(event, migration_stream_);
  pending_.push_back(PendingTransfer{id, event});
}

void CudaBackend::PrefetchRuns(BlockNumber block, const PageMask& pages, bool to_device) {
  cudaMemLocation location{};
  location.type = to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  location.id = to_device ? options_.gpu : 0;
  ForEachPageRun(pages, [&](int first, int count) {
    const uint64_t device = segments_.ToDevice(block * kBlockSize + uint64_t(first) * kPageSize);
    if (device == 0) return;
    const cudaError_t error = cudaMemPrefetchAsync(reinterpret_cast<void*>(device),
                                                   uint64_t(count) * kPageSize, location, 0,
                                                   migration_stream_);
    if (error != cudaSuccess && error_.ok()) {
      error_ = CudaCheck(error, "cudaMemPrefetchAsync");
    }
  });
}

void CudaBackend::DiscardRuns(BlockNumber block, const PageMask& pages) {
  std::vector<void*> pointers;
  std::vector<size_t> sizes;
  ForEachPageRun(pages, [&](int first, int count) {
    const uint64_t device = segments_.ToDevice(block * kBlockSize + uint64_t(first) * kPageSize);
    if (device == 0) return;
    pointers.push_back(reinterpret_cast<void*>(device));
    sizes.push_back(uint64_t(count) * kPageSize);
  });
  if (pointers.empty()) return;
  const cudaError_t error = cudaMemDiscardBatchAsync(pointers.data(), sizes.data(),
                                                     pointers.size(), 0, migration_stream_);
  if (error != cudaSuccess && error_.ok()) error_ = CudaCheck(error, "cudaMemDiscardBatchAsync");
}

void CudaBackend::Migrate(const Transfer& transfer) {
  if (transfer.kind == TransferKind::kFaultMigration) {
    // The driver moved these pages when it serviced the fault; the engine
    // hears of it only now. Completion is handed back after this call.
    completed_now_.push_back(transfer.id);
    return;
  }
  PrefetchRuns(transfer.block, transfer.pages, /*to_device=*/true);
  Fence(transfer.id);
}

void CudaBackend::Evict(const Transfer& transfer) {
  DiscardRuns(transfer.block, transfer.pages & ~transfer.copy);
  PrefetchRuns(transfer.block, transfer.copy, /*to_device=*/false);
  Fence(transfer.id);
}

void CudaBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  DiscardRuns(block, pages);
}

PageUse CudaBackend::QueryUse(BlockNumber block) const {
  const BlockState* state = engine_ == nullptr ? nullptr : engine_->memory_state().Find(block);
  const PageMask resident = state == nullptr ? PageMask() : state->resident;
  return PageUse{resident, resident};
}

void CudaBackend::FillStatistics() {
  RunStats& stats = engine_->mutable_stats();
  stats.time_ns = end_of_last_kernel_ns_;
  stats.stall_ns = std::max<Nanos>(0, stats.time_ns - stats.ideal_time_ns);
  stats.fault_records = fault_records_;
  stats.dropped_records = cupti_->dropped();
  stats.dropped_faults = faults_.dropped();
  uint64_t faults = 0, h2d = 0, d2h = 0;
  for (const Bin& bin : bins_) {
    faults += bin.faults;
    h2d += bin.h2d;
    d2h += bin.d2h;
  }
  // The contract's fault and traffic numbers are what CUPTI measured; the
  // engine's own requests stay in fault_migrated_bytes and prefetch_bytes.
  stats.faults = faults;
  stats.h2d_bytes = h2d;
  stats.d2h_bytes = d2h;
  for (size_t i = 0; i < stats.per_iteration.size() && i + 1 < bins_.size(); ++i) {
    stats.per_iteration[i].faults = bins_[i + 1].faults;
    stats.per_iteration[i].h2d_bytes = bins_[i + 1].h2d;
    stats.per_iteration[i].d2h_bytes = bins_[i + 1].d2h;
  }
  stats.budget_overshoot_max_bytes = overshoot_max_frames_ * kBlockSize;
  stats.budget_overshoot_mean_bytes =
      overshoot_samples_ == 0 ? 0 : overshoot_sum_frames_ * kBlockSize / overshoot_samples_;
}

UMLAB_REGISTER_BACKEND(
    cuda, {"cuda",
           "the real UVM driver on a GPU: managed memory, CUPTI fault records, prefetch and "
           "discard calls",
           {{"gpu", ParamType::kInt, "0", "CUDA device ordinal", ParamRange::AtLeast(0)},
            {"poll_us", ParamType::kDouble, "20", "how often the host polls for fault records",
             ParamRange::AtLeast(0)},
            {"flush_us", ParamType::kDouble, "20000",
             "how often CUPTI is asked to hand over its records", ParamRange::AtLeast(0)}},
           [](const ParamMap& params, const DeviceConfig& device,
              uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
             CudaOptions options;
             options.gpu = static_cast<int>(params.Int("gpu"));
             options.poll_interval_ns = static_cast<Nanos>(params.Double("poll_us") * 1e3);
             options.flush_interval_ns = static_cast<Nanos>(params.Double("flush_us") * 1e3);
             absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
                 CudaBackend::Create(device, capacity_frames, options);
             if (!backend.ok()) return backend.status();
             return std::unique_ptr<Backend>(std::move(*backend));
           }});

}  // namespace umlab::cuda
