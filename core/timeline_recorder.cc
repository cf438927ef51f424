#include "core/timeline_recorder.h"

#include <algorithm>

#include "core/engine.h"

namespace umlab {

TimelineRecorder::TimelineRecorder(Nanos expected_ns, size_t memory_intervals)
    : memory_(expected_ns, memory_intervals) {}

void TimelineRecorder::OnIterationBegin(uint64_t index, Nanos now) {
  if (!timeline_.iterations.empty()) timeline_.iterations.back().end = now;
  Timeline::Iteration iteration;
  iteration.begin = iteration.end = now;
  iteration.index = index;
  timeline_.iterations.push_back(iteration);
  memory_.OnIterationBegin(index, now);
}

void TimelineRecorder::OnKernelDefined(uint32_t exec_id, const std::string& name) {
  timeline_.kernel_names[exec_id] = name;
}

void TimelineRecorder::OnKernelBegin(uint32_t exec_id, Nanos now) {
  Timeline::Kernel kernel;
  kernel.begin = kernel.end = now;
  kernel.exec_id = exec_id;
  timeline_.kernels.push_back(kernel);
}

void TimelineRecorder::OnKernelEnd(uint32_t /*exec_id*/, Nanos now) {
  if (!timeline_.kernels.empty()) timeline_.kernels.back().end = now;
}

void TimelineRecorder::OnFaultBatch(Nanos start, uint64_t faults, uint64_t faulted_pages) {
  Timeline::FaultBatch batch;
  // A real-time backend dates a batch from when its faults were raised,
  // which may be before the previous batch was done: service starts then.
  batch.begin = batch.end =
      timeline_.fault_batches.empty() ? start : std::max(start, timeline_.fault_batches.back().end);
  batch.faults = faults;
  batch.faulted_pages = faulted_pages;
  timeline_.fault_batches.push_back(batch);
}

void TimelineRecorder::OnFaultBatchDone(Nanos now) {
  if (!timeline_.fault_batches.empty()) {
    Timeline::FaultBatch& batch = timeline_.fault_batches.back();
    batch.end = std::max(batch.begin, now);
  }
}

void TimelineRecorder::OnTransferIssued(const Transfer& transfer, Nanos now) {
  Timeline::TransferMark mark;
  mark.kind = transfer.kind;
  mark.block = transfer.block;
  mark.bytes = transfer.copy_bytes();
  mark.issued = now;
  mark.ready = std::max(now, transfer.not_before);
  in_flight_.emplace(transfer.id, mark);
  (transfer.kind == TransferKind::kEviction ? d2h_in_flight_ : h2d_in_flight_) += 1;
  NoteQueueDepth(now);
}

void TimelineRecorder::OnTransferCompleted(const Transfer& transfer, Nanos now) {
  auto it = in_flight_.find(transfer.id);
  if (it == in_flight_.end()) return;
  Timeline::TransferMark mark = it->second;
  in_flight_.erase(it);
  // It could not start before the transfer it waited for had landed.
  if (auto after = landed_.find(transfer.after); transfer.after != 0 && after != landed_.end()) {
    mark.ready = std::max(mark.ready, after->second);
  }
  mark.ready = std::min(mark.ready, now);
  mark.completed = now;
  landed_[transfer.id] = now;
  timeline_.transfers.push_back(mark);
  (transfer.kind == TransferKind::kEviction ? d2h_in_flight_ : h2d_in_flight_) -= 1;
  memory_.OnTransferCompleted(transfer, now);
  NoteQueueDepth(now);
}

void TimelineRecorder::OnInvalidated(BlockNumber block, uint64_t bytes, Nanos now) {
  timeline_.invalidations.push_back(Timeline::Mark{now, block * kBlockSize, bytes, 0});
}

void TimelineRecorder::OnDeviceEvicted(BlockNumber block, uint64_t bytes, Nanos now) {
  timeline_.device_evictions.push_back(Timeline::Mark{now, block * kBlockSize, bytes, 0});
  memory_.OnDeviceEvicted(block, bytes, now);
}

void TimelineRecorder::OnStep(const Engine& engine, Nanos now) {
  memory_.OnStep(engine, now);
  if (engine.pending_prefetches() != prefetch_queue_) {
    prefetch_queue_ = engine.pending_prefetches();
    NoteQueueDepth(now);
  }
}

void TimelineRecorder::OnFinish(const Engine& engine, Nanos now) {
  // Transfers still on their way when the program ended count in the run's
  // totals (bytes are booked at issue): they end with the run, marked.
  std::vector<std::pair<TransferId, Timeline::TransferMark>> unfinished(in_flight_.begin(),
                                                                         in_flight_.end());
  std::sort(unfinished.begin(), unfinished.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [id, mark] : unfinished) {
    mark.ready = std::min(mark.ready, now);
    mark.completed = now;
    mark.unfinished = true;
    timeline_.transfers.push_back(mark);
  }
  in_flight_.clear();
  memory_.OnFinish(engine, now);
  timeline_.memory = memory_.series();
  if (!timeline_.iterations.empty()) timeline_.iterations.back().end = now;
}

void TimelineRecorder::NoteQueueDepth(Nanos now) {
  const Timeline::QueueDepth depth{now, h2d_in_flight_, d2h_in_flight_,
                                   static_cast<uint32_t>(prefetch_queue_)};
  // One value per instant: the last change at `now` wins.
  if (!timeline_.queue_depth.empty() && timeline_.queue_depth.back().time == now) {
    timeline_.queue_depth.back() = depth;
  } else {
    timeline_.queue_depth.push_back(depth);
  }
}

}  // namespace umlab
