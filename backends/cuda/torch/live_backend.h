// The backend for a PyTorch training umlab watches but does not drive: the
// process launches its own kernels and allocates its own memory; the UVM
// driver serves its faults. The engine, with any registered policy, hears
// of it as the cuda backend's engine hears of a replayed program:
//   - kernel begin and end at the instants the GPU reaches them, from the
//     launch observer's stream stamps, each named by DeepUM's execution id;
//   - allocator events from the managed pool (segments, not the caching
//     allocator's blocks: PyTorch frees into its cache, unseen);
//   - faults and the driver's own evictions from CUPTI's records
//     (DriverRecordReader, shared with the cuda backend);
// and acts through prefetch, eviction and discard calls on a stream of its
// own (TransferIssuer). Capacity is the balloon's: the driver evicts by
// itself (memory=driver), and the engine's budget is the same number.
#ifndef UMLAB_BACKENDS_CUDA_TORCH_LIVE_BACKEND_H_
#define UMLAB_BACKENDS_CUDA_TORCH_LIVE_BACKEND_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cuda/driver_calls.h"
#include "backends/cuda/driver_record_reader.h"
#include "backends/cuda/transfer_issuer.h"
#include "backends/cuda/torch/launch_observer.h"
#include "backends/cuda/uvm_driver_backend.h"
#include "core/backend.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

class LiveBackend final : public UvmDriverBackend {
 public:
  LiveBackend(int gpu, const LaunchObserver& launches, Nanos poll_interval_ns);
  ~LiveBackend() override;

  // Producers, on any thread.
  // A managed segment was allocated, or is about to be freed.
  void OnSegment(bool allocated, uint64_t address, uint64_t bytes);
  // PyTorch's caching allocator handed out a block (`live`) or took one
  // back into its cache: the engine's allocator events kActivate and
  // kDeactivate, DeepUM's inputs for invalidation.
  void OnBlock(bool live, uint64_t address, uint64_t bytes);
  // The training's next iteration starts now (CUPTI's clock).
  void MarkIteration(uint64_t cupti_timestamp);
  // CUPTI's records, as the session's flusher drains them.
  void OnRecords(const std::vector<UnifiedMemoryRecord>& records);
  // The training is over: Run hands the rest over and returns.
  void Stop();

  std::string name() const override { return "torch"; }
  // Serves the engine until Stop; `program` is not read (the process is the
  // program).
  absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) override;
  // The balloon leaves only the capacity: the driver makes room for every
  // arrival, the policy's prefetches included.
  bool MakesRoomFor(TransferKind) const override { return true; }
  Nanos Now() const override;

  // After Run: the driver's faults and traffic (RunStats' contract).
  void FillStatistics(RunStats& stats) const;
  // The first failed driver call of the engine's transfers, if any.
  absl::Status transfer_status() const;

 private:
  struct Pending {
    EventKind kind = EventKind::kIterationBegin;  // or an allocator event
    uint64_t address = 0, bytes = 0, timestamp = 0;
  };
  // The process's own addresses, in live segments only.
  std::vector<DriverCalls::Span> Spans(BlockNumber block, const PageMask& pages) const override;
  // Allocator events and iteration marks, in the order they came.
  void DeliverProgramEvents(uint64_t& iteration);
  // Kernel begins and ends the GPU has stamped since the last call.
  void DeliverKernels();
  void ReadRecords();

  const int gpu_;
  const LaunchObserver& launches_;
  const Nanos poll_interval_ns_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  DriverRecordReader reader_;
  cudaStream_t stream_ = nullptr;

  std::mutex inbox_mutex_;
  std::vector<Pending> pending_;
  std::vector<UnifiedMemoryRecord> records_inbox_;
  std::vector<UnifiedMemoryRecord> records_;
  std::atomic<bool> stop_{false};

  uint64_t delivered_begun_ = 0;  // the last launch whose begin the engine heard
  uint64_t delivered_ended_ = 0;  // and whose end
  uint32_t current_exec_id_ = 0;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TORCH_LIVE_BACKEND_H_
