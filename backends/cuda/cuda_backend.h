// The cuda backend: the same engine and policies on a real GPU, through the
// UVM driver.
//
// The program's segments are CUDA managed memory; each program kernel runs
// as a real kernel that touches its pages in order and computes for about
// its compute time. The driver services the faults itself; CUPTI reports
// them (late, and in groups) and the engine answers as it does on the other
// backends: it keeps residency within --capacity by evicting (prefetch to
// the host), prefetches what the policy asks for, and discards what the
// policy invalidates. All of it goes on a dedicated stream that overlaps
// the kernels. Time, faults and traffic in the results are the real ones.
#ifndef UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_
#define UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/managed_segments.h"
#include "core/backend.h"
#include "core/engine.h"
#include "emu/device_presets.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

struct CudaOptions {
  int gpu = 0;                 // CUDA device ordinal
  Nanos poll_interval_ns = 20000;  // how often the host looks for fault records
  // A CUPTI flush costs about 2 ms on an H200: every 2 ms made a run 20x
  // slower than every 20 ms. Full buffers arrive without one anyway.
  Nanos flush_interval_ns = 20000000;  // how often CUPTI is asked to hand over records
};

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const DeviceConfig& device,
                                                             uint64_t capacity_frames,
                                                             const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) override;

  void SetListener(TransferListener* listener) override { listener_ = listener; }
  size_t FetchFaults(absl::Span<FaultEntry> out) override { return faults_.Fetch(out); }
  void Migrate(const Transfer& transfer) override;
  void Evict(const Transfer& transfer) override;
  void Invalidate(BlockNumber block, const PageMask& pages) override;
  // The GPU keeps no dirty or accessed bits the host can read: every
  // resident page counts as both (UVM writes back whole chunks).
  PageUse QueryUse(BlockNumber block) const override;
  // The hardware replays faults itself once the driver has serviced them.
  void Replay(ReplayPolicy, BlockNumber, Nanos) override {}
  Nanos Now() const override;

 private:
  struct PendingTransfer {
    TransferId id;
    cudaEvent_t done;
  };
  struct AccessRange {
    uint64_t address;
    uint64_t size;
    bool write;
  };

  CudaBackend(const DeviceConfig& device, uint64_t capacity_frames, const CudaOptions& options,
              int sm_count, uint64_t memory_limit);
  absl::Status Initialise();
  absl::Status ExecuteKernel(const Event& begin, const Event& end);
  absl::Status UploadPages(uint64_t count);
  // Gathers fault records, lets the engine service them, and hands finished
  // transfers back to it.
  absl::Status Poll(bool flush);
  void DeliverCompletions();
  void Fence(TransferId id);
  // Issues one range call per run of pages; `to_device` or to the host.
  void PrefetchRuns(BlockNumber block, const PageMask& pages, bool to_device);
  void DiscardRuns(BlockNumber block, const PageMask& pages);
  size_t IterationOf(uint64_t cupti_timestamp) const;
  void FillStatistics();

  DeviceConfig device_;
  CudaOptions options_;
  uint64_t capacity_frames_;
  int sm_count_;
  ManagedSegments segments_;
  std::unique_ptr<CuptiFaultStream> cupti_;
  FaultBuffer faults_;
  Engine* engine_ = nullptr;
  uint32_t current_exec_id_ = 0;
  TransferListener* listener_ = nullptr;
  EventSink* recorder_ = nullptr;
  absl::Status error_;

  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t migration_stream_ = nullptr;
  std::deque<PendingTransfer> pending_;
  std::vector<TransferId> completed_now_;
  std::vector<cudaEvent_t> spare_events_;

  std::vector<AccessRange> ranges_;
  std::vector<uint64_t> host_pages_;
  uint64_t* pinned_pages_ = nullptr;
  uint64_t* device_pages_ = nullptr;
  uint64_t page_buffer_entries_ = 0;

  std::chrono::steady_clock::time_point start_;
  Nanos last_flush_ns_ = 0;
  Nanos end_of_last_kernel_ns_ = 0;
  uint64_t cupti_start_ = 0;
  std::vector<uint64_t> iteration_starts_;  // CUPTI timestamps
  std::vector<UnifiedMemoryRecord> records_;

  // Measured, binned per iteration (index 0 = before the first iteration).
  struct Bin {
    uint64_t faults = 0, h2d = 0, d2h = 0;
  };
  std::vector<Bin> bins_;
  uint64_t fault_records_ = 0;
  uint64_t overshoot_max_frames_ = 0;
  uint64_t overshoot_sum_frames_ = 0;
  uint64_t overshoot_samples_ = 0;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_
