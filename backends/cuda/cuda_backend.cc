#include "backends/cuda/cuda_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "core/access_pace.h"
#include "core/backend_registry.h"
#include "core/block_range.h"
#include "core/byte_size.h"
#include "core/sigint_guard.h"

namespace umlab::cuda {
namespace {

absl::Status CudaCheck(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s", what, cudaGetErrorString(error)));
}

// Engine mode: managed memory the backend leaves free for the driver's own
// use, so that the driver never has to evict.
constexpr double kUsableFreeFraction = 0.85;

uint64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

// Reads a stamp the GPU writes into host-mapped memory.
uint64_t ReadStamp(const uint64_t& stamp) {
  return *static_cast<const volatile uint64_t*>(&stamp);
}

// Writes one from the host (a host kernel's), as the GPU would.
void WriteStamp(uint64_t& stamp, uint64_t value) {
  *static_cast<volatile uint64_t*>(&stamp) = value;
}

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
  cudaFree(nullptr);  // creates the context CUPTI needs
  size_t free_bytes = 0, total_bytes = 0;
  if (absl::Status s = CudaCheck(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      !s.ok()) {
    return s;
  }
  std::unique_ptr<CudaBackend> backend(
      new CudaBackend(device, capacity_frames, options, free_bytes));
  if (absl::Status s = backend->Initialise(); !s.ok()) return s;
  return backend;
}

CudaBackend::CudaBackend(const DeviceConfig& device, uint64_t capacity_frames,
                         const CudaOptions& options, uint64_t gpu_free_bytes)
    : device_(device),
      options_(options),
      capacity_frames_(capacity_frames),
      gpu_free_bytes_(gpu_free_bytes),
      start_(std::chrono::steady_clock::now()),
      driver_records_(options.memory == MemoryMode::kDriver,
                      [this](uint64_t managed) { return segments_.ToProgram(managed); }) {}

absl::Status CudaBackend::Initialise() {
  if (absl::Status s = driver_records_.OpenLog(options_.record_log); !s.ok()) return s;
  // Times in ns since the first kernel's begin on the GPU's clock.
  if (absl::Status s = OpenCsvLog(options_.kernel_log, "kernels",
                                  "kernel,exec_id,accesses,issuers,compute_ns,begin_ns,end_ns\n",
                                  kernel_log_);
      !s.ok()) {
    return s;
  }
  // Times in ns since the run began on the host's clock (Now()).
  if (absl::Status s = OpenCsvLog(options_.memory_log, "memory_log",
                                  "time_ns,engine_used_frames,capacity_frames,gpu_free_bytes\n",
                                  memory_log_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          OpenCsvLog(options_.call_log, "calls", TransferIssuer::kCallLogHeader, call_log_);
      !s.ok()) {
    return s;
  }
  // Times in ns since the run's start on the records' clock; batch: a
  // fault event's fault batch, empty for a migration.
  if (absl::Status s = OpenCsvLog(options_.migration_log, "migrations",
                                  "kind,cause,address,bytes,start_ns,end_ns,batch\n",
                                  migration_log_);
      !s.ok()) {
    return s;
  }
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
  balloon_.reset();
  calls_.Stop();
  if (device_ranges_ != nullptr) cudaFree(device_ranges_);
  if (counters_ != nullptr) cudaFree(counters_);
  if (progress_ != nullptr) cudaFreeHost(progress_);
  if (compute_stream_ != nullptr) cudaStreamDestroy(compute_stream_);
  if (migration_stream_ != nullptr) cudaStreamDestroy(migration_stream_);
}

Nanos CudaBackend::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

void CudaBackend::Fail(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_.ok()) error_ = std::move(status);
  }
  stop_.store(true);
}

bool CudaBackend::stopping() const { return stop_.load(std::memory_order_relaxed); }

bool CudaBackend::StopIfInterrupted() {
  if (!SigintGuard::interrupted()) return false;
  Fail(absl::CancelledError(
      "interrupted (SIGINT); the run stopped and its GPU memory was given back"));
  return true;
}

// ---------------------------------------------------------------------------
// Before the run.

absl::Status CudaBackend::Prepare() {
  const bool bounded = capacity_frames_ < kUnlimitedFrames;
  const uint64_t capacity_bytes = bounded ? capacity_frames_ * kBlockSize : 0;
  if (options_.memory == MemoryMode::kDriver) {
    // The driver may evict to the host, so the footprint is bounded by the
    // host's memory instead of the GPU's; half of it leaves the host usable.
    const uint64_t host_limit = HostMemoryBytes() / 2;
    if (plan_.segment_bytes > host_limit) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the program needs %s of managed memory, more than half of the host's memory (%s); "
          "use a smaller workload",
          FormatBytes(plan_.segment_bytes), FormatBytes(host_limit)));
    }
  } else {
    const uint64_t gpu_limit =
        static_cast<uint64_t>(static_cast<double>(gpu_free_bytes_) * kUsableFreeFraction);
    if (plan_.segment_bytes > gpu_limit) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the program needs %s of managed memory, but only %s of the GPU is free; with "
          "memory=engine oversubscription comes from --capacity, not from the GPU: use a "
          "smaller workload or memory=driver",
          FormatBytes(plan_.segment_bytes), FormatBytes(gpu_limit)));
    }
  }
  for (const PlannedSegment& segment : plan_.segments) {
    if (absl::Status s = segments_.Reserve(segment.address, segment.size); !s.ok()) return s;
  }

  std::vector<DeviceRange> ranges;
  ranges.reserve(plan_.ranges.size());
  for (const PlannedKernel& kernel : plan_.kernels) {
    uint64_t first_access = 0;
    for (uint64_t i = kernel.first_range; i < kernel.first_range + kernel.range_count; ++i) {
      const PlannedRange& range = plan_.ranges[i];
      // The plan checked that every range lies inside one segment.
      ranges.push_back(DeviceRange{segments_.ToDevice(range.first_page * kPageSize) |
                                       (range.write ? 1 : 0),
                                   first_access});
      first_access += range.pages;
    }
  }
  // One slot more than kernels: the warm-up kernel's.
  const size_t kernels = plan_.kernels.size();
  if (absl::Status s = CudaCheck(
          cudaMalloc(reinterpret_cast<void**>(&device_ranges_),
                     std::max<size_t>(1, ranges.size()) * sizeof(DeviceRange)),
          "cudaMalloc(page lists)");
      !s.ok()) {
    return s;
  }
  if (!ranges.empty()) {
    if (absl::Status s = CudaCheck(cudaMemcpy(device_ranges_, ranges.data(),
                                              ranges.size() * sizeof(DeviceRange),
                                              cudaMemcpyHostToDevice),
                                   "cudaMemcpy(page lists)");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CudaCheck(cudaMalloc(reinterpret_cast<void**>(&counters_),
                                            (kernels + 1) * sizeof(KernelCounters)),
                                 "cudaMalloc(kernel counters)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CudaCheck(cudaMemset(counters_, 0, (kernels + 1) * sizeof(KernelCounters)), "cudaMemset");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaCheck(cudaHostAlloc(reinterpret_cast<void**>(&progress_),
                                               (kernels + 1) * sizeof(KernelProgress),
                                               cudaHostAllocMapped),
                                 "cudaHostAlloc(kernel progress)");
      !s.ok()) {
    return s;
  }
  std::memset(progress_, 0, (kernels + 1) * sizeof(KernelProgress));

  // One empty kernel before the balloon: the context's lazy allocations for
  // launching happen now, not out of the capacity. Its begin stamp, seen
  // from the host, ties CUPTI's clock to the GPU's.
  KernelCounters* warm_counters = counters_ + kernels;
  KernelProgress* warm_progress = progress_ + kernels;
  ReplayKernelArgs warm;
  warm.counters = warm_counters;
  warm.progress = warm_progress;
  if (absl::Status s = CudaCheck(LaunchReplayKernel(warm, 1, compute_stream_), "kernel launch");
      !s.ok()) {
    return s;
  }
  while (ReadStamp(warm_progress->begin_ns) == 0) {
    if (cudaStreamQuery(compute_stream_) != cudaErrorNotReady &&
        ReadStamp(warm_progress->begin_ns) == 0) {
      return absl::InternalError("the warm-up kernel ended without stamping its begin");
    }
  }
  cupti_minus_gpu_ns_ = CuptiFaultStream::Timestamp() - ReadStamp(warm_progress->begin_ns);
  if (absl::Status s = CudaCheck(cudaStreamSynchronize(compute_stream_), "warm-up kernel");
      !s.ok()) {
    return s;
  }

  // Last, so that what is left free is the capacity and nothing else.
  if (options_.memory == MemoryMode::kDriver && bounded) {
    absl::StatusOr<std::unique_ptr<GpuBalloon>> balloon =
        GpuBalloon::Inflate(capacity_bytes + options_.driver_reserve_bytes);
    if (!balloon.ok()) return balloon.status();
    balloon_ = std::move(*balloon);
  }
  return CudaCheck(cudaDeviceSynchronize(), "preparing the run");
}

// ---------------------------------------------------------------------------
// Running the program.

absl::Status CudaBackend::Run(EventSource& program, Engine& engine, EventSink* recorder) {
  engine_ = &engine;
  recorder_ = recorder;
  SigintGuard sigint;
  absl::StatusOr<ReplayPlan> plan = BuildReplayPlan(program, recorder != nullptr);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  // CUPTI reports unified-memory activity only for managed memory allocated
  // after it starts: it must come before Prepare.
  absl::StatusOr<std::unique_ptr<CuptiFaultStream>> cupti = CuptiFaultStream::Start(options_.gpu, options_.record_buffer_bytes);
  if (!cupti.ok()) return cupti.status();
  cupti_ = std::move(*cupti);
  if (absl::Status s = Prepare(); !s.ok()) return s;
  cupti_->Flush();
  records_.clear();
  cupti_->Drain(records_);  // nothing before the run counts
  cupti_start_ = CuptiFaultStream::Timestamp();
  // Every transfer the driver makes, from a queue of umlab's own; without
  // it the engine hears CUPTI's transfer records, as it did before.
  // The migration log holds the faults too, whichever source the engine
  // hears them from.
  const bool hear_fault_events = options_.fault_records == CudaOptions::RecordSource::kUvm;
  const bool want_fault_events = hear_fault_events || !options_.migration_log.empty();
  if (absl::StatusOr<std::unique_ptr<UvmEventQueue>> events =
          UvmEventQueue::Open(want_fault_events);
      events.ok()) {
    uvm_events_ = std::move(*events);
    uvm_events_->Flush();
    queue_events_.clear();
    uvm_events_->Drain(queue_events_, cupti_minus_gpu_ns_);  // nothing before the run counts
  } else if (options_.transfers == CudaOptions::RecordSource::kUvm || hear_fault_events) {
    std::fprintf(stderr, "umlab: %s; the engine hears CUPTI's records instead\n",
                 std::string(events.status().message()).c_str());
  } else if (!options_.migration_log.empty()) {
    std::fprintf(stderr, "umlab: %s; the migration log stays empty\n",
                 std::string(events.status().message()).c_str());
  }
  transfers_from_uvm_ =
      uvm_events_ != nullptr && options_.transfers == CudaOptions::RecordSource::kUvm;
  faults_from_uvm_ = uvm_events_ != nullptr && hear_fault_events;
  driver_records_.HearFaultsFromEvents(faults_from_uvm_);
  // A complete count of the run's traffic beside the records, read after
  // the queue was opened and emptied, so that both count from here
  // (uvm_tools_counters.h). Not having it is no reason to stop the run.
  if (absl::StatusOr<std::unique_ptr<UvmToolsCounters>> counters = UvmToolsCounters::Open();
      counters.ok()) {
    uvm_counters_ = std::move(*counters);
    uvm_at_start_ = uvm_counters_->Read();
  } else {
    std::fprintf(stderr, "umlab: %s; uvm_h2d_bytes and uvm_d2h_bytes stay 0\n",
                 std::string(counters.status().message()).c_str());
  }
  start_ = std::chrono::steady_clock::now();
  driver_records_.Start(cupti_start_);

  calls_.Start(options_.gpu, migration_stream_,
               {call_log_.get(), &CuptiFaultStream::Timestamp, cupti_start_});
  std::thread engine_thread([this] {
    cudaSetDevice(options_.gpu);  // the current device is per thread
    ServeEngine();
    flusher_done_.store(true);
  });
  // A CUPTI flush holds its caller for about 2 ms on an H200, so it has a
  // thread of its own: fault records reach the engine within a flush or
  // two instead of whenever a buffer fills.
  std::thread flusher([this] {
    while (!flusher_done_.load() && !stopping()) {
      cupti_->Flush(options_.forced_flush);
      std::this_thread::sleep_for(std::chrono::nanoseconds(options_.flush_interval_ns));
    }
  });
  LaunchAll();
  engine_thread.join();
  flusher_done_.store(true);
  flusher.join();
  // Whatever stopped the run, nothing of it may still run on the GPU when
  // the memory goes.
  cudaStreamSynchronize(compute_stream_);
  if (absl::Status s = calls_.status(); !s.ok()) Fail(std::move(s));
  calls_.Stop();
  // The last calls may have moved data after the engine's final poll: the
  // traffic counts it, as the driver's counters do.
  if (uvm_events_ != nullptr) {
    DrainDriverQueue(/*flush=*/true);
    if (transfers_from_uvm_) driver_records_.CountTrailing(queue_events_);
  }
  if (uvm_counters_ != nullptr) uvm_at_end_ = uvm_counters_->Read();
  balloon_.reset();
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!error_.ok()) return error_;
  FillStatistics();
  return absl::OkStatus();
}

void CudaBackend::LaunchAll() {
  const uint64_t kernels = plan_.kernels.size();
  const uint64_t run_ahead = static_cast<uint64_t>(std::max(1, options_.run_ahead));
  // The preset's issuers, laid over the GPU: its warps per SM to a block.
  const unsigned warps_per_block = static_cast<unsigned>(std::max(1, device_.warps_per_sm));
  for (uint64_t k = 0; k < kernels && !stopping(); ++k) {
    // A framework's launch queue is bounded: wait until the GPU has ended
    // the kernel `run_ahead` back.
    while (k >= run_ahead && ReadStamp(progress_[k - run_ahead].end_ns) == 0) {
      if (stopping() || StopIfInterrupted()) return;
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
    const PlannedKernel& kernel = plan_.kernels[k];
    if (plan_.host_kernels > 0) {
      // In program order, for the host kernels' reads: what the program
      // dropped before this kernel, and what this kernel writes.
      for (uint64_t i = kernel.first_event; i < kernel.first_event + kernel.event_count; ++i) {
        const Event& event = plan_.between[i];
        if (event.kind == EventKind::kFree || event.kind == EventKind::kDeactivate) {
          page_writes_.Dropped(event.address, event.size);
        }
      }
    }
    if (kernel.on_host) {
      if (!RunHostKernel(k)) return;
      continue;
    }
    if (plan_.host_kernels > 0) {
      for (uint64_t r = kernel.first_range; r < kernel.first_range + kernel.range_count; ++r) {
        const PlannedRange& range = plan_.ranges[r];
        if (range.write) page_writes_.Written(range.first_page, range.pages);
      }
    }
    ReplayKernelArgs args;
    args.ranges = device_ranges_ + kernel.first_range;
    args.range_count = kernel.range_count;
    args.accesses = kernel.accesses;
    args.compute_ns = static_cast<uint64_t>(std::max<Nanos>(0, kernel.begin.duration_ns));
    const AccessPace pace = PaceOfKernel(kernel);
    args.workers = static_cast<unsigned>(std::max<uint64_t>(1, pace.issuers));
    args.per_access_ns = static_cast<uint64_t>(pace.step_ps / 1000);
    args.counters = counters_ + k;
    args.progress = progress_ + k;  // mapped memory has one address on both sides (UVA)
    if (absl::Status s = CudaCheck(LaunchReplayKernel(args, warps_per_block, compute_stream_),
                                   "kernel launch");
        !s.ok()) {
      Fail(std::move(s));
      return;
    }
  }
}

// ---------------------------------------------------------------------------
// Host kernels (see the top of cuda_backend.h).

uint64_t CudaBackend::GpuClockNow() const {
  // CUPTI's clock less its offset from the GPU's, measured at the warm-up
  // kernel's begin (Prepare): a host kernel's stamps sit among the GPU's
  // own, off by the time the host took to see that begin (microseconds).
  return CuptiFaultStream::Timestamp() - cupti_minus_gpu_ns_;
}

template <typename Done>
bool CudaBackend::SpinUntil(Done done) {
  while (!done()) {
    if (stopping() || StopIfInterrupted()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(5));
  }
  return true;
}

bool CudaBackend::RunHostKernel(uint64_t k) {
  const PlannedKernel& kernel = plan_.kernels[k];
  // The CPU works in program order: after every kernel before it. Those
  // are in order on one stream, so the last one's end stamp says all have
  // ended; the synchronisation then makes their writes the host's to see
  // (it returns at once, and reports a kernel that failed).
  if (k > 0 && !SpinUntil([&] { return ReadStamp(progress_[k - 1].end_ns) != 0; })) {
    return false;
  }
  if (absl::Status s = CudaCheck(cudaStreamSynchronize(compute_stream_), "kernel"); !s.ok()) {
    Fail(std::move(s));
    return false;
  }
  WriteStamp(progress_[k].begin_ns, GpuClockNow());
  // The engine thread claims the pages at the begin; the CPU may touch them
  // once no migration of them is under way and the engine has let them go.
  if (!SpinUntil([&] { return host_settled_.load(std::memory_order_acquire) == k; })) {
    return false;
  }
  const auto cpu_start = std::chrono::steady_clock::now();
  if (absl::Status s = TouchFromHost(kernel); !s.ok()) {
    Fail(std::move(s));
    return false;
  }
  // The rest of its CPU time: the CPU is busy, as a CPU optimizer step keeps it.
  const auto cpu_end =
      cpu_start + std::chrono::nanoseconds(std::max<Nanos>(0, kernel.begin.duration_ns));
  while (std::chrono::steady_clock::now() < cpu_end) {
    if (stopping()) return false;
  }
  // The end lets the engine thread release the claims; the next kernel is
  // launched only after it.
  WriteStamp(progress_[k].end_ns, GpuClockNow());
  return true;
}

absl::Status CudaBackend::TouchFromHost(const PlannedKernel& kernel) {
  // One word per 4 KiB page through the managed pointer, which is the
  // CPU's to dereference too (unified addressing): a page on the GPU faults
  // and the driver migrates it to the host. A read checks the page's first
  // word; a write adds one to it, as the replay kernel writes.
  for (uint64_t r = kernel.first_range; r < kernel.first_range + kernel.range_count; ++r) {
    const PlannedRange& range = plan_.ranges[r];
    for (PageNumber page = range.first_page; page < range.first_page + range.pages; ++page) {
      auto* word = reinterpret_cast<volatile uint32_t*>(segments_.ToDevice(page * kPageSize));
      const uint32_t value = *word;
      if (range.write) {
        *word = value + 1;
        page_writes_.Written(page, 1);
        ++host_touches_.pages_written;
        continue;
      }
      ++host_touches_.pages_read;
      const std::optional<uint32_t> expected = page_writes_.Expected(page);
      if (!expected.has_value()) continue;
      ++host_touches_.pages_checked;
      if (value != *expected) {
        return absl::DataLossError(absl::StrFormat(
            "cuda: host kernel %d read %d at %#x, a page written %d times: the CPU saw stale "
            "data (a write-back or migration to the host that never happened)",
            kernel.begin.exec_id, value, page * kPageSize, *expected));
      }
    }
  }
  return absl::OkStatus();
}

void CudaBackend::ClaimForHost(const PlannedKernel& kernel) {
  RunStats& stats = engine_->mutable_stats();
  ++stats.host_kernels;
  host_claimed_at_ = Now();
  // Known before the engine evicts any of them (Evict).
  host_claimed_.clear();
  for (uint64_t r = kernel.first_range; r < kernel.first_range + kernel.range_count; ++r) {
    const PlannedRange& range = plan_.ranges[r];
    ForEachBlockRange(range.first_page * kPageSize, range.pages * kPageSize, false,
                      [&](BlockNumber block, const PageMask& pages) {
                        host_claimed_[block] |= pages;
                      });
  }
  for (uint64_t r = kernel.first_range; r < kernel.first_range + kernel.range_count; ++r) {
    const PlannedRange& range = plan_.ranges[r];
    engine_->ClaimForHost(range.first_page * kPageSize, range.pages * kPageSize, range.write);
  }
}

bool CudaBackend::HostClaimsSettled(uint64_t k) {
  if (host_settled_.load(std::memory_order_relaxed) == k) return true;
  if (!engine_->health().ok()) {
    Fail(engine_->health());
    return false;
  }
  if (!engine_->HostClaimsSettled()) return false;
  engine_->mutable_stats().host_wait_ns += Now() - host_claimed_at_;
  host_settled_.store(k, std::memory_order_release);
  return true;
}

void CudaBackend::Evict(const Transfer& transfer) {
  if (options_.memory == MemoryMode::kDriver) {
    auto claimed = host_claimed_.find(transfer.block);
    if (claimed != host_claimed_.end() && (transfer.pages & ~claimed->second).none()) {
      // Under UVM a CPU access to a page on the GPU faults, and the driver
      // migrates the page to the host then: a prefetch to the host first
      // would be a call the program never makes, faster than the CPU's
      // faults. So the engine's books let the pages go now, and the
      // driver moves them when the CPU touches them (CUPTI's coherence
      // records say so later). Pages the policy drops are still dropped.
      calls_.LeaveToTheCpu(transfer, Spans(transfer.block, transfer.pages & ~transfer.copy));
      return;
    }
  }
  UvmDriverBackend::Evict(transfer);
}

void CudaBackend::DeliverBetween(uint64_t first, uint64_t count, uint64_t next_kernel) {
  for (uint64_t i = first; i < first + count; ++i) {
    const Event& event = plan_.between[i];
    if (recorder_ != nullptr) recorder_->Record(event);
    if (event.kind == EventKind::kIterationBegin) {
      // The iteration began when its first kernel did, on the GPU's clock;
      // on CUPTI's, for binning its records.
      iteration_first_kernel_.push_back(next_kernel);
      const uint64_t kernels = plan_.kernels.size();
      const uint64_t begin = next_kernel < kernels ? ReadStamp(progress_[next_kernel].begin_ns)
                             : kernels > 0         ? ReadStamp(progress_[kernels - 1].end_ns)
                                                   : 0;
      driver_records_.MarkIteration(begin + cupti_minus_gpu_ns_);
    }
    // Allocations need nothing here: all managed memory exists already. A
    // free makes the engine discard the segment's pages (Invalidate).
    engine_->OnProgramEvent(event);
  }
}

void CudaBackend::SampleMemory() {
  if (memory_log_ == nullptr) return;
  const Nanos now = Now();
  if (now < next_memory_sample_) return;
  constexpr Nanos kMemorySamplePeriodNs = 1'000'000;
  next_memory_sample_ = now + kMemorySamplePeriodNs;
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  std::fprintf(memory_log_.get(), "%lld,%llu,%llu,%zu\n", static_cast<long long>(now),
               static_cast<unsigned long long>(engine_->memory_state().used_frames()),
               static_cast<unsigned long long>(capacity_frames_), free_bytes);
}

void CudaBackend::ServeEngine() {
  const uint64_t kernels = plan_.kernels.size();
  uint64_t next = 0;     // the kernel whose begin or end comes next
  bool begun = false;    // whether `next` has begun (its begin delivered)
  int idle_polls = 0;
  while (next < kernels) {
    if (stopping() || StopIfInterrupted()) return;
    bool progressed = false;
    while (next < kernels) {
      const PlannedKernel& kernel = plan_.kernels[next];
      if (!begun) {
        if (ReadStamp(progress_[next].begin_ns) == 0) break;
        DeliverBetween(kernel.first_event, kernel.event_count, next);
        if (recorder_ != nullptr) {
          for (const Event& event : kernel.events) recorder_->Record(event);
        }
        current_exec_id_ = kernel.begin.exec_id;
        // A host kernel's pages are claimed before the engine hears of its
        // begin, so that a prefetch the policy asks for there finds them held.
        if (kernel.on_host) ClaimForHost(kernel);
        engine_->OnProgramEvent(kernel.begin);
        if (!kernel.on_host) {
          for (uint64_t r = kernel.first_range; r < kernel.first_range + kernel.range_count; ++r) {
            const PlannedRange& range = plan_.ranges[r];
            CountRemoteAccesses(range.first_page, range.pages, range.write);
          }
        }
        begun = true;
        progressed = true;
      }
      // A host kernel's CPU waits for its claims: Poll hands the engine the
      // transfers that settle them.
      if (kernel.on_host && !HostClaimsSettled(next)) break;
      if (ReadStamp(progress_[next].end_ns) == 0) break;
      if (kernel.on_host) {
        engine_->ReleaseHostClaims();
        host_claimed_.clear();
      }
      engine_->OnProgramEvent(kernel.end);
      current_exec_id_ = 0;
      begun = false;
      ++next;
      progressed = true;
    }
    if (absl::Status s = Poll(false); !s.ok()) {
      Fail(std::move(s));
      return;
    }
    SampleMemory();
    if (progressed) {
      idle_polls = 0;
      continue;
    }
    // Nothing new for a while: a kernel that failed never stamps its end.
    if (++idle_polls % 1000 == 0) {
      const cudaError_t state = cudaStreamQuery(compute_stream_);
      if (state != cudaSuccess && state != cudaErrorNotReady) {
        Fail(CudaCheck(state, "kernel"));
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(options_.poll_interval_ns));
  }
  DeliverBetween(plan_.between.size() - plan_.trailing_events, plan_.trailing_events, kernels);
  calls_.Drain();
  // Hand every outstanding record over, then account for it.
  if (absl::Status s = Poll(/*flush=*/true); !s.ok()) {
    Fail(std::move(s));
    return;
  }
  engine_->Finish();
}

absl::Status CudaBackend::Poll(bool flush) {
  const Nanos now = Now();
  // During the run the flusher thread hands records over; at the end, this.
  if (flush) cupti_->Flush();
  records_.clear();
  cupti_->Drain(records_);
  TakeDriverQueue(flush);
  const uint64_t arriving = driver_records_.Read(
      records_, *engine_, faults_, current_exec_id_, now,
      [this](uint64_t program_address, uint64_t start_ns) {
        if (recorder_ == nullptr) return;
        Event fault;
        fault.kind = EventKind::kFault;
        fault.address = PageOfAddress(program_address) * kPageSize;
        fault.time_ns = static_cast<Nanos>(start_ns - cupti_start_);
        recorder_->Record(fault);
      });
  // Engine mode: the driver has already made these blocks resident, so
  // until the engine evicts, residency exceeds the budget by whatever does
  // not fit.
  if (options_.memory == MemoryMode::kEngine && arriving > 0 &&
      capacity_frames_ < kUnlimitedFrames) {
    const uint64_t resident = engine_->memory_state().used_frames() + arriving;
    const uint64_t over = resident > capacity_frames_ ? resident - capacity_frames_ : 0;
    overshoot_max_frames_ = std::max(overshoot_max_frames_, over);
    overshoot_sum_frames_ += over;
    ++overshoot_samples_;
  }
  if (!faults_.empty()) engine_->ServiceFaults();
  DeliverCompletions(driver_records_);
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}


void CudaBackend::DrainDriverQueue(bool flush) {
  if (flush) uvm_events_->Flush();
  queue_events_.clear();
  uvm_events_->Drain(queue_events_, cupti_minus_gpu_ns_);
  if (migration_log_ != nullptr) {
    for (const UnifiedMemoryRecord& event : queue_events_) {
      std::fprintf(migration_log_.get(), "%s,%s,0x%llx,%llu,%lld,%lld,", KindName(event.kind),
                   CauseName(event.cause), static_cast<unsigned long long>(event.address),
                   static_cast<unsigned long long>(event.value),
                   LogTime(event.start_ns, cupti_start_), LogTime(event.end_ns, cupti_start_));
      if (event.kind == UnifiedMemoryRecord::Kind::kFaultEvent) {
        std::fprintf(migration_log_.get(), "%u", event.batch);
      }
      std::fputc('\n', migration_log_.get());
    }
  }
}

void CudaBackend::TakeDriverQueue(bool flush) {
  if (uvm_events_ == nullptr) return;
  DrainDriverQueue(flush);
  if (transfers_from_uvm_) {
    // The driver's own events stand in for CUPTI's transfer records.
    std::erase_if(records_, [](const UnifiedMemoryRecord& record) {
      return record.kind == UnifiedMemoryRecord::Kind::kBytesHostToDevice ||
             record.kind == UnifiedMemoryRecord::Kind::kBytesDeviceToHost ||
             record.kind == UnifiedMemoryRecord::Kind::kBytesDeviceToDevice;
    });
  }
  for (const UnifiedMemoryRecord& event : queue_events_) {
    if (transfers_from_uvm_ || event.kind == UnifiedMemoryRecord::Kind::kFaultEvent) {
      records_.push_back(event);
    }
  }
}

// ---------------------------------------------------------------------------
// Data movement.

std::vector<DriverCalls::Span> CudaBackend::Spans(BlockNumber block,
                                                  const PageMask& pages) const {
  std::vector<DriverCalls::Span> spans;
  ForEachPageRun(pages, [&](int first, int count) {
    const uint64_t device = segments_.ToDevice(block * kBlockSize + uint64_t(first) * kPageSize);
    if (device != 0) spans.push_back({device, uint64_t(count) * kPageSize});
  });
  return spans;
}

void CudaBackend::FillStatistics() {
  RunStats& stats = engine_->mutable_stats();
  // Time on the GPU's own clock: from the first kernel's begin to the last
  // one's end; the gaps between kernels are the launch overhead.
  const uint64_t kernels = plan_.kernels.size();
  if (kernels > 0) {
    stats.time_ns = static_cast<Nanos>(progress_[kernels - 1].end_ns - progress_[0].begin_ns);
    Nanos gaps = 0;
    for (uint64_t k = 1; k < kernels; ++k) {
      if (progress_[k].begin_ns > progress_[k - 1].end_ns) {
        gaps += static_cast<Nanos>(progress_[k].begin_ns - progress_[k - 1].end_ns);
      }
    }
    stats.launch_ns = gaps;
  }
  // What the kernels lost to memory: neither compute nor launching.
  stats.stall_ns = std::max<Nanos>(0, stats.time_ns - stats.ideal_time_ns - stats.launch_ns);
  driver_records_.FillStatistics(stats);
  if (uvm_counters_ != nullptr) {
    stats.uvm_h2d_bytes = uvm_at_end_.to_device - uvm_at_start_.to_device;
    stats.uvm_d2h_bytes = uvm_at_end_.from_device - uvm_at_start_.from_device;
  }
  stats.dropped_records = cupti_->dropped();
  if (transfers_from_uvm_ || faults_from_uvm_) stats.dropped_records += uvm_events_->dropped();
  stats.dropped_faults = faults_.dropped();
  for (size_t i = 0; i < stats.per_iteration.size() && i < iteration_first_kernel_.size(); ++i) {
    // From the iteration's first kernel's begin to the next one's, or to
    // the last kernel's end.
    const uint64_t first = iteration_first_kernel_[i];
    const uint64_t next =
        i + 1 < iteration_first_kernel_.size() ? iteration_first_kernel_[i + 1] : kernels;
    if (first < next && next <= kernels) {
      const uint64_t until =
          next < kernels ? progress_[next].begin_ns : progress_[kernels - 1].end_ns;
      stats.per_iteration[i].time_ns = static_cast<Nanos>(until - progress_[first].begin_ns);
    }
  }
  stats.budget_overshoot_max_bytes = overshoot_max_frames_ * kBlockSize;
  stats.budget_overshoot_mean_bytes =
      overshoot_samples_ == 0 ? 0 : overshoot_sum_frames_ * kBlockSize / overshoot_samples_;
  LogKernels();
}

AccessPace CudaBackend::PaceOfKernel(const PlannedKernel& kernel) const {
  // Paced as on the sim.
  return PaceOf(kernel.begin.duration_ns, kernel.accesses,
                static_cast<uint64_t>(device_.access_streams()));
}

void CudaBackend::LogKernels() {
  if (kernel_log_ == nullptr || plan_.kernels.empty()) return;
  const uint64_t origin = progress_[0].begin_ns;
  for (uint64_t k = 0; k < plan_.kernels.size(); ++k) {
    const PlannedKernel& kernel = plan_.kernels[k];
    std::fprintf(kernel_log_.get(), "%llu,%u,%llu,%u,%lld,%lld,%lld\n",
                 static_cast<unsigned long long>(k), kernel.begin.exec_id,
                 static_cast<unsigned long long>(kernel.accesses),
                 // A host kernel has no issuers on the GPU.
                 kernel.on_host ? 0u : static_cast<unsigned>(PaceOfKernel(kernel).issuers),
                 static_cast<long long>(kernel.begin.duration_ns),
                 static_cast<long long>(progress_[k].begin_ns - origin),
                 static_cast<long long>(progress_[k].end_ns - origin));
  }
}


UMLAB_REGISTER_BACKEND(
    cuda,
    {"cuda",
     "the real UVM driver on a GPU: managed memory, kernels at the GPU's pace, CUPTI fault "
     "records, prefetch and discard calls",
     {{"gpu", ParamType::kInt, "0", "CUDA device ordinal", ParamRange::AtLeast(0)},
      {"memory", ParamType::kString, "driver",
       "how memory runs out: driver (a cudaMalloc balloon leaves only --capacity free and the "
       "UVM driver evicts by itself) or engine (the GPU keeps its memory; the engine's budget "
       "evicts)",
       {},
       {"driver", "engine"}},  // MemoryMode's order
      {"room", ParamType::kString, "all",
       "memory=driver: what the driver makes room for by itself, evicting its own victim: "
       "all (faults and the policy's prefetches; the policy's pre-evictions still run) or "
       "faults (the engine first evicts the policy's victim for a prefetch into a full device)",
       {},
       {"all", "faults"}},
      {"reserve_mib", ParamType::kInt, "2",
       "memory=driver: room the balloon leaves beyond --capacity for the driver's own use, so "
       "that managed data gets the whole capacity (the H200's driver keeps about 3 MiB free; "
       "umlab_room_probe measures it, docs/cuda.md)",
       ParamRange::Closed(0, 1 << 20)},
      {"run_ahead", ParamType::kInt, "256", "kernels launched ahead of the GPU",
       ParamRange::Closed(1, 1 << 20)},
      {"poll_us", ParamType::kDouble, "20", "how often the engine thread looks for news",
       ParamRange::AtLeast(0)},
      // At 10 ms a run lost about 2/3 of its records with none reported
      // dropped (docs/cuda.md, run 13), so longer pauses are refused.
      {"flush_us", ParamType::kDouble, "1000",
       "pause between CUPTI flushes (each takes about 2 ms), from a thread of their own; at "
       "most 2000, since the driver drops records CUPTI is slow to collect",
       ParamRange::Closed(0, 2000)},
      {"forced_flush", ParamType::kBool, "false",
       "ask CUPTI's flushes for buffers still being filled too, not only completed ones (on "
       "an H200 with CUDA 13 unified-memory records still came in whole buffers)"},
      {"buffer_kb", ParamType::kInt, "64",
       "size of each CUPTI record buffer; a full buffer is handed over without a flush",
       ParamRange::Closed(4, 1 << 16)},
      {"transfers", ParamType::kString, "uvm",
       "where the engine hears of the driver's transfers: uvm (the driver's own event queue, "
       "read by umlab; falls back to cupti where /dev/nvidia-uvm-tools cannot be used) or "
       "cupti (CUPTI's records, which lose some while a policy pre-evicts; docs/cuda.md)",
       {},
       {"uvm", "cupti"}},  // CudaOptions::RecordSource's order
      {"fault_records", ParamType::kString, "cupti",
       "where the engine hears of the faults the driver serviced: uvm (the driver's own event "
       "queue: every fault, within a poll; falls back to cupti as transfers does) or cupti "
       "(CUPTI's fault records: one per fault group, naming one address, late); CUPTI's are "
       "counted as faults and fault_records either way",
       {},
       {"uvm", "cupti"}},
      {"migrations", ParamType::kString, "",
       "write every migration the driver's event queue reports (direction, cause, address, "
       "bytes, begin and end on the records' clock) and every GPU fault it serviced (kind "
       "fault_event, when the GPU raised it, and its fault batch) to this CSV file"},
      {"records", ParamType::kString, "",
       "write every unified-memory record the engine hears (CUPTI's faults, the transfers with "
       "their cause, the driver's thrashing and throttling) to this CSV file"},
      {"kernels", ParamType::kString, "",
       "write each kernel's accesses, issuers, compute time and its begin and end on the GPU's "
       "clock to this CSV file"},
      {"calls", ParamType::kString, "",
       "write each of the engine's calls (prefetch, eviction, discard: its spans and bytes, "
       "when it was submitted and when its calls began and ended, on the records' clock) to "
       "this CSV file"},
      {"memory_log", ParamType::kString, "",
       "write, every millisecond, the frames the engine's books hold and the GPU's free memory "
       "(cudaMemGetInfo) to this CSV file: where the engine's view departs from the driver's"}},
     [](const ParamMap& params, const DeviceConfig& device,
        uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
       CudaOptions options;
       options.gpu = static_cast<int>(params.Int("gpu"));
       options.memory = static_cast<MemoryMode>(params.Choice("memory"));
       options.run_ahead = static_cast<int>(params.Int("run_ahead"));
       options.poll_interval_ns = static_cast<Nanos>(params.Double("poll_us") * 1e3);
       options.flush_interval_ns = static_cast<Nanos>(params.Double("flush_us") * 1e3);
       options.record_log = params.String("records");
       options.transfers = static_cast<CudaOptions::RecordSource>(params.Choice("transfers"));
       options.fault_records =
           static_cast<CudaOptions::RecordSource>(params.Choice("fault_records"));
       options.migration_log = params.String("migrations");
       options.forced_flush = params.Bool("forced_flush");
       options.record_buffer_bytes = static_cast<size_t>(params.Int("buffer_kb")) << 10;
       options.kernel_log = params.String("kernels");
       options.memory_log = params.String("memory_log");
       options.call_log = params.String("calls");
       options.driver_room_for_prefetches = params.Choice("room") == 0;  // "all"
       options.driver_reserve_bytes = static_cast<uint64_t>(params.Int("reserve_mib")) << 20;
       absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
           CudaBackend::Create(device, capacity_frames, options);
       if (!backend.ok()) return backend.status();
       return std::unique_ptr<Backend>(std::move(*backend));
     }});

}  // namespace umlab::cuda
