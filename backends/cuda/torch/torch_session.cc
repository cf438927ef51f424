#include "backends/cuda/torch/torch_session.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/cuda/torch/managed_pool.h"
#include "core/policy_stats.h"
#include "emu/device_presets.h"

namespace umlab::cuda {
namespace {

// The live engine's program is the process itself: nothing to read.
class NoProgram final : public EventSource {
 public:
  bool Next(Event& /*event*/) override { return false; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<TorchSession>> TorchSession::Start(
    const TorchSessionOptions& options) {
  std::unique_ptr<TorchSession> session(new TorchSession());
  session->options_ = options;
  if (cudaSetDevice(options.gpu) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("umlab_torch: cannot use CUDA device %d (is there a GPU?)", options.gpu));
  }
  SetManagedPoolLimit(options.host_limit_bytes);
  if (options.capacity_bytes > 0) {
    absl::StatusOr<std::unique_ptr<GpuBalloon>> balloon =
        GpuBalloon::Inflate(options.capacity_bytes);
    if (!balloon.ok()) return balloon.status();
    session->balloon_ = std::move(*balloon);
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  session->free_after_balloon_ = free_bytes;
  absl::StatusOr<std::unique_ptr<CuptiFaultStream>> records =
      CuptiFaultStream::Start(options.gpu, 64 << 10, /*kernel_times=*/options.record);
  if (!records.ok()) return records.status();
  session->records_ = std::move(*records);
  absl::StatusOr<std::unique_ptr<LaunchObserver>> launches =
      LaunchObserver::Start(/*stream_stamps=*/!options.policy.empty());
  if (!launches.ok()) return launches.status();
  session->launches_ = std::move(*launches);
  if (options.record) {
    session->recorder_ = std::make_unique<ProgramRecorder>();
    session->launches_->SetListener(
        [](void* context, uint32_t execution_id, absl::string_view name, const uint64_t* words,
           size_t count) {
          auto* self = static_cast<TorchSession*>(context);
          std::lock_guard<std::mutex> lock(self->recorder_mutex_);
          self->recorder_->OnLaunch(execution_id, name, absl::MakeConstSpan(words, count));
        },
        session.get());
  }
  if (!options.policy.empty()) {
    if (absl::Status s = session->StartEngine(); !s.ok()) return s;
  }
  // Segments go to the live engine and the recorder, whichever run.
  SetManagedPoolListener(
      [](void* context, bool allocated, uint64_t address, uint64_t bytes) {
        auto* self = static_cast<TorchSession*>(context);
        if (self->live_ != nullptr) self->live_->OnSegment(allocated, address, bytes);
        if (self->recorder_ != nullptr) {
          std::lock_guard<std::mutex> lock(self->recorder_mutex_);
          self->recorder_->OnSegment(allocated, address, bytes);
        }
      },
      session.get());
  session->start_timestamp_ = CuptiFaultStream::Timestamp();
  // A flush holds its caller for about 2 ms, so it gets a thread of its own
  // (as in the cuda backend), and records are drained as they come.
  TorchSession* self = session.get();
  session->flusher_ = std::thread([self] {
    while (!self->stopping_.load()) {
      self->records_->Flush();
      self->Drain();
      std::this_thread::sleep_for(std::chrono::nanoseconds(self->options_.flush_interval_ns));
    }
  });
  return session;
}

absl::Status TorchSession::StartEngine() {
  absl::StatusOr<DeviceConfig> device = DevicePreset(options_.device);
  if (!device.ok()) return device.status();
  if (device->link.storage.present) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "umlab_torch: device %s has a storage tier, which a GPU run does not model; pick a "
        "device without one (umlab devices)", options_.device));
  }
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(options_.policy);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("umlab_torch: --policy=%s: %s", options_.policy, policy.status().message()));
  }
  if ((*policy)->PlansAhead()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "umlab_torch: policy %s plans over the whole program before it runs, and a live "
        "training has no program to read ahead; record it (umlab torch --record=FILE.umt) and "
        "replay the trace with umlab run --trace=FILE.umt",
        options_.policy));
  }
  policy_ = std::move(*policy);
  live_ = std::make_unique<LiveBackend>(options_.gpu, *launches_, options_.poll_interval_ns);
  const EngineConfig config = EngineConfigFor(*device);
  // The engine's budget is the balloon's capacity; without a balloon the
  // GPU's memory is all there is.
  const uint64_t capacity_frames =
      options_.capacity_bytes > 0 ? options_.capacity_bytes / kBlockSize : kUnlimitedFrames;
  engine_ = std::make_unique<Engine>(*live_, *policy_, capacity_frames, config);
  engine_thread_ = std::thread([this] {
    NoProgram nothing;
    engine_status_ = live_->Run(nothing, *engine_, nullptr);
  });
  return absl::OkStatus();
}

std::string TorchSession::StopEngine() {
  if (live_ == nullptr) return "null";
  live_->Stop();
  if (engine_thread_.joinable()) engine_thread_.join();
  RunStats& stats = engine_->mutable_stats();
  live_->FillStatistics(stats);
  PolicyStats policy_stats;
  policy_->ReportStats(policy_stats);
  std::vector<std::string> counters;
  for (const PolicyStats::Counter& counter : policy_stats.counters()) {
    counters.push_back(std::visit(
        [&](auto value) { return absl::StrCat("\"", counter.name, "\": ", value); },
        counter.value));
  }
  absl::Status status = engine_status_;
  if (status.ok()) status = live_->transfer_status();
  return absl::StrFormat(
      "{\"policy\": \"%s\", \"status\": \"%s\", \"kernels\": %d, \"fault_batches\": %d, "
      "\"faulted_pages\": %d, \"faulted_in_flight_pages\": %d, \"faulted_blocks\": %d, "
      "\"prefetch_requests\": %d, \"prefetch_bytes\": %d, \"prefetch_useful_bytes\": %d, "
      "\"pre_evictions\": %d, \"evictions\": %d, \"device_evictions\": %d, "
      "\"evicted_bytes\": %d, \"invalidated_bytes\": %d, \"stale_eviction_records\": %d, "
      "\"fault_records\": %d, \"peak_used_frames\": %d, \"policy_stats\": {%s}}",
      options_.policy, status.ok() ? "ok" : std::string(status.message()), stats.kernels,
      stats.fault_batches, stats.faulted_pages, stats.faulted_in_flight_pages,
      stats.faulted_blocks, stats.prefetch_requests, stats.prefetch_bytes,
      stats.prefetch_useful_bytes, stats.pre_evictions, stats.evictions, stats.device_evictions,
      stats.evicted_bytes, stats.invalidated_bytes, stats.stale_eviction_records,
      stats.fault_records, stats.peak_used_frames, absl::StrJoin(counters, ", "));
}

TorchSession::~TorchSession() {
  SetManagedPoolListener(nullptr, nullptr);
  if (launches_ != nullptr) launches_->SetListener(nullptr, nullptr);
  if (live_ != nullptr && engine_thread_.joinable()) StopEngine();
  stopping_.store(true);
  if (flusher_.joinable()) flusher_.join();
  // The observers go before the balloon, so the device memory is returned
  // last and on every way out.
  launches_.reset();
  records_.reset();
  balloon_.reset();
}

void TorchSession::OnBlock(bool live, uint64_t address, uint64_t bytes) {
  if (live_ != nullptr) live_->OnBlock(live, address, bytes);
  if (recorder_ != nullptr) {
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    recorder_->OnBlock(live, address, bytes);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++block_events_;
}

void TorchSession::MarkIteration() {
  std::lock_guard<std::mutex> lock(mutex_);
  marks_.push_back(CuptiFaultStream::Timestamp());
  if (live_ != nullptr) live_->MarkIteration(marks_.back());
  mark_launches_.push_back(launches_->counts().launches);
  bins_.emplace_back();
  if (recorder_ != nullptr) {
    std::lock_guard<std::mutex> recording(recorder_mutex_);
    recorder_->OnIteration();
  }
}

void TorchSession::Drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  scratch_.clear();
  records_->Drain(scratch_);
  if (live_ != nullptr) live_->OnRecords(scratch_);
  if (recorder_ != nullptr) {
    records_->DrainKernels(kernel_records_);
    for (const UnifiedMemoryRecord& record : scratch_) {
      if (record.kind == UnifiedMemoryRecord::Kind::kGpuPageFault) {
        fault_points_.emplace_back(record.address, record.start_ns);
      }
    }
  }
  for (const UnifiedMemoryRecord& record : scratch_) {
    const size_t index = static_cast<size_t>(
        std::upper_bound(marks_.begin(), marks_.end(), record.start_ns) - marks_.begin());
    Bin& bin = bins_[std::min(index, bins_.size() - 1)];
    const int cause = std::min<int>(static_cast<int>(record.cause), 5);
    switch (record.kind) {
      case UnifiedMemoryRecord::Kind::kGpuPageFault:
        bin.faults += record.value;
        ++bin.fault_records;
        break;
      case UnifiedMemoryRecord::Kind::kBytesHostToDevice:
        bin.h2d_bytes += record.value;
        bin.h2d_by_cause[cause] += record.value;
        break;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToHost:
        bin.d2h_bytes += record.value;
        bin.d2h_by_cause[cause] += record.value;
        break;
      case UnifiedMemoryRecord::Kind::kThrashing:
        ++bin.thrashing;
        break;
      case UnifiedMemoryRecord::Kind::kThrottling:
        if (record.end_ns > record.start_ns) bin.throttled_ns += record.end_ns - record.start_ns;
        break;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToDevice:
        break;  // one GPU: none
      case UnifiedMemoryRecord::Kind::kFaultEvent:
        break;  // CUPTI's stream carries none
    }
  }
}

std::string TorchSession::Report() {
  cudaDeviceSynchronize();
  stopping_.store(true);
  if (flusher_.joinable()) flusher_.join();
  // Kernel times sit in buffers that are not full: hand them over too.
  records_->Flush(/*forced=*/recorder_ != nullptr);
  Drain();
  const uint64_t end_timestamp = CuptiFaultStream::Timestamp();
  const std::string engine = StopEngine();
  const std::string recording = FinishRecording();
  const LaunchCounts launches = launches_->counts();
  const ManagedPoolCounters pool = ManagedPoolSnapshot();
  std::lock_guard<std::mutex> lock(mutex_);
  auto bin_json = [](const Bin& bin) {
    std::vector<std::string> h2d, d2h;
    static const char* kCauses[6] = {"unknown", "user", "coherence", "prefetch", "eviction",
                                     "access_counters"};
    for (int c = 0; c < 6; ++c) {
      if (bin.h2d_by_cause[c] > 0) h2d.push_back(absl::StrFormat("\"%s\": %d", kCauses[c], bin.h2d_by_cause[c]));
      if (bin.d2h_by_cause[c] > 0) d2h.push_back(absl::StrFormat("\"%s\": %d", kCauses[c], bin.d2h_by_cause[c]));
    }
    return absl::StrFormat(
        "{\"faults\": %d, \"fault_records\": %d, \"h2d_bytes\": %d, \"d2h_bytes\": %d, "
        "\"h2d_by_cause\": {%s}, \"d2h_by_cause\": {%s}, \"thrashing_detections\": %d, "
        "\"throttled_ns\": %d}",
        bin.faults, bin.fault_records, bin.h2d_bytes, bin.d2h_bytes, absl::StrJoin(h2d, ", "),
        absl::StrJoin(d2h, ", "), bin.thrashing, bin.throttled_ns);
  };
  // How often an iteration's launches repeat an execution id the previous
  // iteration had: what DeepUM's correlation tables need (docs/torch.md).
  // Launches of the iteration whose id the previous iteration also had.
  struct Repeats {
    std::vector<uint32_t> sequence;
    absl::flat_hash_set<uint32_t> previous;
    uint64_t Count(uint64_t first, uint64_t last) {
      uint64_t repeated = 0;
      absl::flat_hash_set<uint32_t> ids;
      for (uint64_t i = first; i < last && i < sequence.size(); ++i) {
        repeated += previous.contains(sequence[i]) ? 1 : 0;
        ids.insert(sequence[i]);
      }
      previous = std::move(ids);
      return repeated;
    }
  };
  Repeats full{launches_->sequence(), {}};
  Repeats tensors{launches_->tensor_sequence(), {}};
  Bin total;
  std::vector<std::string> iterations;
  for (size_t i = 0; i < bins_.size(); ++i) {
    const Bin& bin = bins_[i];
    total.faults += bin.faults;
    total.fault_records += bin.fault_records;
    total.h2d_bytes += bin.h2d_bytes;
    total.d2h_bytes += bin.d2h_bytes;
    total.thrashing += bin.thrashing;
    total.throttled_ns += bin.throttled_ns;
    for (int c = 0; c < 6; ++c) {
      total.h2d_by_cause[c] += bin.h2d_by_cause[c];
      total.d2h_by_cause[c] += bin.d2h_by_cause[c];
    }
    if (i == 0) continue;  // before the first mark: set-up
    const uint64_t begin = marks_[i - 1];
    const uint64_t end = i < marks_.size() ? marks_[i] : end_timestamp;
    const uint64_t first_launch = mark_launches_[i - 1];
    const uint64_t last_launch = i < mark_launches_.size() ? mark_launches_[i] : launches.launches;
    const uint64_t repeated = full.Count(first_launch, last_launch);
    const uint64_t tensor_repeated = tensors.Count(first_launch, last_launch);
    iterations.push_back(absl::StrFormat(
        "{\"time_ns\": %d, \"kernels\": %d, \"execution_ids\": %d, "
        "\"repeated_ids\": %d, \"tensor_execution_ids\": %d, \"repeated_tensor_ids\": %d, "
        "\"records\": %s}",
        end - begin, last_launch - first_launch, full.previous.size(), repeated,
        tensors.previous.size(), tensor_repeated, bin_json(bin)));
  }
  return absl::StrFormat(
      "{\"gpu\": %d, \"capacity_bytes\": %d, \"balloon_bytes\": %d, "
      "\"free_bytes_after_balloon\": %d, \"time_ns\": %d, \"kernels\": %d, "
      "\"execution_ids\": %d, \"tensor_execution_ids\": %d, \"runtime_launches\": %d, "
      "\"unsized_launches\": %d, "
      "\"managed_segments\": %d, \"peak_managed_bytes\": %d, \"refused_allocations\": %d, "
      "\"dropped_records\": %d, \"block_events\": %d, \"records\": %s, \"engine\": %s, "
      "\"recording\": %s, \"iterations\": [%s]}",
      options_.gpu, options_.capacity_bytes, balloon_ ? balloon_->reserved_bytes() : 0,
      free_after_balloon_, end_timestamp - start_timestamp_, launches.launches,
      launches.execution_ids, launches.tensor_execution_ids, launches.runtime_launches,
      launches.unsized_launches,
      pool.segments_allocated, pool.peak_live_bytes, pool.refused, records_->dropped(),
      block_events_, bin_json(total), engine, recording, absl::StrJoin(iterations, ", "));
}

std::string TorchSession::FinishRecording() {
  if (recorder_ == nullptr) return "null";
  launches_->SetListener(nullptr, nullptr);
  std::lock_guard<std::mutex> lock(recorder_mutex_);
  // A kernel's activity record names the driver call that launched it, or
  // the runtime call that made that one.
  const std::vector<std::pair<uint32_t, uint32_t>> correlations = launches_->correlations();
  absl::flat_hash_map<uint32_t, uint64_t> launch_of;
  for (uint64_t i = 0; i < correlations.size(); ++i) {
    if (correlations[i].first != 0) launch_of[correlations[i].first] = i;
    if (correlations[i].second != 0) launch_of.try_emplace(correlations[i].second, i);
  }
  struct Span {
    uint64_t start, end, launch;
  };
  std::vector<Span> spans;
  uint64_t unmatched = 0;
  for (const KernelRecord& kernel : kernel_records_) {
    auto it = launch_of.find(kernel.correlation);
    if (it == launch_of.end() || kernel.end_ns < kernel.start_ns) {
      ++unmatched;
      continue;
    }
    recorder_->SetDuration(it->second, static_cast<Nanos>(kernel.end_ns - kernel.start_ns));
    spans.push_back({kernel.start_ns, kernel.end_ns, it->second});
  }
  // Each fault belongs to the kernel running when it was raised.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<std::pair<uint64_t, uint64_t>> faults;
  for (const auto& [address, timestamp] : fault_points_) {
    auto it = std::upper_bound(spans.begin(), spans.end(), timestamp,
                               [](uint64_t t, const Span& s) { return t < s.start; });
    uint64_t launch = UINT64_MAX;
    if (it != spans.begin() && timestamp <= std::prev(it)->end) launch = std::prev(it)->launch;
    faults.emplace_back(address, launch);
  }
  const AccessCoverage coverage = recorder_->Coverage(faults);
  std::string written = "not asked";
  if (!options_.record_path.empty()) {
    absl::Status status = recorder_->Write(
        options_.record_path,
        {{"workload", options_.workload.empty() ? "torch" : options_.workload},
         {"device", options_.device},
         {"source", "umlab torch: CUPTI launches and kernel times, PyTorch's allocator events"},
         {"access_sets", "argument words into live allocator blocks (docs/torch.md)"},
         {"capacity_bytes", absl::StrCat(options_.capacity_bytes)}});
    written = status.ok() ? "ok" : std::string(status.message());
  }
  const RecordingStats& s = recorder_->stats();
  return absl::StrFormat(
      "{\"path\": \"%s\", \"written\": \"%s\", \"launches\": %d, \"timed_launches\": %d, "
      "\"kernel_records\": %d, \"unmatched_kernel_records\": %d, \"accesses\": %d, "
      "\"written_blocks\": %d, \"pointer_words\": %d, \"block_words\": %d, "
      "\"segment_words\": %d, \"foreign_blocks\": %d, \"launches_without_access\": %d, "
      "\"fault_records\": %d, \"fault_records_explained\": %d, "
      "\"fault_records_outside_kernels\": %d}",
      absl::CEscape(options_.record_path), absl::CEscape(written), s.launches, s.timed_launches,
      kernel_records_.size(), unmatched, s.accesses, s.written_blocks, s.pointer_words,
      s.block_words, s.segment_words, s.foreign_blocks, s.launches_without_access,
      coverage.faults, coverage.explained, coverage.outside_any_kernel);
}

}  // namespace umlab::cuda
