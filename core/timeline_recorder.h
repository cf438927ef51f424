// Everything a run did, with times, for a timeline (`--timeline=FILE`,
// docs/report.md): kernels on the compute stream, fault batches, every
// transfer from issue to completion, drops, device evictions, and counters
// of device memory and queue depth. cli/timeline_json.cc writes it as
// Chrome trace-event JSON; `umlab timeline FILE.umt` fills the parts a
// trace holds.
#ifndef UMLAB_CORE_TIMELINE_RECORDER_H_
#define UMLAB_CORE_TIMELINE_RECORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/engine_observer.h"
#include "core/memory_units.h"
#include "core/run_series.h"
#include "core/transfer.h"

namespace umlab {

struct Timeline {
  struct Span {
    Nanos begin = 0;
    Nanos end = 0;
  };
  struct Kernel : Span {
    uint32_t exec_id = 0;
  };
  struct Iteration : Span {
    uint64_t index = 0;
  };
  struct FaultBatch : Span {
    uint64_t faults = 0;
    uint64_t faulted_pages = 0;
  };
  // One transfer. `completed` is kNever where it is unknown (a trace records
  // only when a transfer was issued).
  struct TransferMark {
    TransferKind kind = TransferKind::kFaultMigration;
    BlockNumber block = 0;
    uint64_t bytes = 0;  // bytes that cross the link
    Nanos issued = 0;
    Nanos ready = 0;     // may not start before (fault latency, a dependency)
    Nanos completed = kNever;
    bool unfinished = false;  // still on its way when the run ended (completed: the end)
  };
  // A drop, a device eviction, a single fault: something at one instant.
  struct Mark {
    Nanos time = 0;
    uint64_t address = 0;  // of the block (a drop, an eviction) or page (a fault)
    uint64_t bytes = 0;
    uint32_t exec_id = 0;  // faults only
  };
  // Counters at the instants they changed.
  struct QueueDepth {
    Nanos time = 0;
    uint32_t h2d = 0;             // migrations issued, not landed
    uint32_t d2h = 0;             // evictions issued, not landed
    uint32_t prefetch_queue = 0;  // requests the engine has not issued
  };

  std::map<uint32_t, std::string> kernel_names;
  std::vector<Iteration> iterations;
  std::vector<Kernel> kernels;
  std::vector<FaultBatch> fault_batches;
  std::vector<TransferMark> transfers;  // in completion order (issue order from a trace)
  std::vector<Mark> invalidations;
  std::vector<Mark> device_evictions;
  std::vector<Mark> faults;  // single faults: only a trace gives these
  std::vector<QueueDepth> queue_depth;
  // Device memory by kind of page, sampled as RunSeries samples it.
  RunSeries memory;
  // What the timeline could not show, for its metadata (a trace's untimed
  // kernels, say).
  std::vector<std::string> notes;
};

class TimelineRecorder final : public EngineObserver {
 public:
  // `expected_ns` and `memory_intervals` size the memory samples, as for
  // RunSeriesRecorder.
  TimelineRecorder(Nanos expected_ns, size_t memory_intervals);

  // The timeline, complete once the run has finished.
  const Timeline& timeline() const { return timeline_; }

  void OnIterationBegin(uint64_t index, Nanos now) override;
  void OnKernelDefined(uint32_t exec_id, const std::string& name) override;
  void OnKernelBegin(uint32_t exec_id, Nanos now) override;
  void OnKernelEnd(uint32_t exec_id, Nanos now) override;
  void OnFaultBatch(Nanos start, uint64_t faults, uint64_t faulted_pages) override;
  void OnFaultBatchDone(Nanos now) override;
  void OnTransferIssued(const Transfer& transfer, Nanos now) override;
  void OnTransferCompleted(const Transfer& transfer, Nanos now) override;
  void OnInvalidated(BlockNumber block, uint64_t bytes, Nanos now) override;
  void OnDeviceEvicted(BlockNumber block, uint64_t bytes, Nanos now) override;
  void OnStep(const Engine& engine, Nanos now) override;
  void OnFinish(const Engine& engine, Nanos now) override;

 private:
  void NoteQueueDepth(Nanos now);

  Timeline timeline_;
  RunSeriesRecorder memory_;
  // Issued and not landed, by transfer id.
  absl::flat_hash_map<TransferId, Timeline::TransferMark> in_flight_;
  // When each landed transfer landed, for the ones that wait on it.
  absl::flat_hash_map<TransferId, Nanos> landed_;
  uint32_t h2d_in_flight_ = 0;
  uint32_t d2h_in_flight_ = 0;
  size_t prefetch_queue_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_TIMELINE_RECORDER_H_
