#include "backends/cuda/torch/live_backend.h"

#include <thread>

#include "backends/cuda/torch/managed_pool.h"
#include "core/engine.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab::cuda {

LiveBackend::LiveBackend(int gpu, const LaunchObserver& launches, Nanos poll_interval_ns)
    : gpu_(gpu),
      launches_(launches),
      poll_interval_ns_(poll_interval_ns),
      // The process's managed pointers are the program's addresses.
      reader_(/*driver_evicts=*/true,
              [](uint64_t address) -> std::optional<uint64_t> { return address; }) {}

LiveBackend::~LiveBackend() {
  calls_.Stop();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void LiveBackend::OnSegment(bool allocated, uint64_t address, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  pending_.push_back(Pending{allocated ? EventKind::kAlloc : EventKind::kFree, address, bytes, 0});
}

void LiveBackend::OnBlock(bool live, uint64_t address, uint64_t bytes) {
  // Called with PyTorch's allocator lock held: only the inbox's lock here.
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  pending_.push_back(
      Pending{live ? EventKind::kActivate : EventKind::kDeactivate, address, bytes, 0});
}

void LiveBackend::MarkIteration(uint64_t cupti_timestamp) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  pending_.push_back(Pending{EventKind::kIterationBegin, 0, 0, cupti_timestamp});
}

void LiveBackend::OnRecords(const std::vector<UnifiedMemoryRecord>& records) {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  records_inbox_.insert(records_inbox_.end(), records.begin(), records.end());
}

void LiveBackend::Stop() { stop_.store(true); }

Nanos LiveBackend::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

absl::Status LiveBackend::Run(EventSource& /*program*/, Engine& engine, EventSink* /*recorder*/) {
  engine_ = &engine;
  cudaSetDevice(gpu_);  // the current device is per thread
  if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
    return absl::InternalError("umlab_torch: cannot create the engine's stream");
  }
  reader_.Start(CuptiFaultStream::Timestamp());
  calls_.Start(gpu_, stream_);
  uint64_t iteration = 0;
  auto serve = [&] {
    DeliverProgramEvents(iteration);
    DeliverKernels();
    ReadRecords();
    DeliverCompletions(reader_);
  };
  while (!stop_.load()) {
    serve();
    std::this_thread::sleep_for(std::chrono::nanoseconds(poll_interval_ns_));
  }
  // The training is over: what the GPU and CUPTI still had, then the end.
  calls_.Drain();
  serve();
  engine.Finish();
  return absl::OkStatus();
}

void LiveBackend::DeliverProgramEvents(uint64_t& iteration) {
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    pending.swap(pending_);
  }
  for (const Pending& item : pending) {
    Event event;
    event.kind = item.kind;
    if (item.kind == EventKind::kIterationBegin) {
      reader_.MarkIteration(item.timestamp);
      event.iteration = iteration++;
    } else {
      event.address = item.address;
      event.size = item.bytes;
    }
    engine_->OnProgramEvent(event);
  }
}

void LiveBackend::DeliverKernels() {
  // On one stream a kernel begins after the one before it has ended, so a
  // begin stamp ends every kernel before it. Stamps from other streams can
  // run behind; they are waited for.
  const uint64_t begun = launches_.begun();
  auto end_open_kernel = [&] {
    if (delivered_ended_ >= delivered_begun_) return;
    Event end;
    end.kind = EventKind::kKernelEnd;
    end.exec_id = current_exec_id_;
    engine_->OnProgramEvent(end);
    delivered_ended_ = delivered_begun_;
    current_exec_id_ = 0;
  };
  while (delivered_begun_ < begun) {
    end_open_kernel();
    Event begin;
    begin.kind = EventKind::kKernelBegin;
    begin.exec_id = launches_.ExecutionIdOf(++delivered_begun_);
    current_exec_id_ = begin.exec_id;
    engine_->OnProgramEvent(begin);
  }
  if (launches_.ended() >= delivered_begun_) end_open_kernel();
}

void LiveBackend::ReadRecords() {
  records_.clear();
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    records_.swap(records_inbox_);
  }
  if (records_.empty()) return;
  reader_.Read(records_, *engine_, faults_, current_exec_id_, Now(), nullptr);
  if (!faults_.empty() && !engine_->servicing()) engine_->ServiceFaults();
}


std::vector<DriverCalls::Span> LiveBackend::Spans(BlockNumber block,
                                                  const PageMask& pages) const {
  // A segment PyTorch has given back must not be touched: its pages are
  // skipped (the engine hears of the free a poll later).
  std::vector<DriverCalls::Span> spans;
  ForEachPageRun(pages, [&](int first, int count) {
    const uint64_t address = block * kBlockSize + uint64_t(first) * kPageSize;
    if (InManagedSegment(address)) spans.push_back({address, uint64_t(count) * kPageSize});
  });
  return spans;
}

void LiveBackend::FillStatistics(RunStats& stats) const {
  reader_.FillStatistics(stats);
  stats.dropped_faults = faults_.dropped();
}

absl::Status LiveBackend::transfer_status() const { return calls_.status(); }

}  // namespace umlab::cuda
