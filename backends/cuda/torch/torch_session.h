// One PyTorch training measured under managed memory: the balloon that
// leaves only the capacity free (real oversubscription), CUPTI's
// unified-memory records (faults, and bytes moved each way with the
// driver's reason), and every kernel launch with its execution id. The
// training marks its iterations; the report splits the records by them.
//
// This is what `python3 -m umlab_torch` drives through the C functions in
// torch_c_api.cc. With a policy, an engine runs beside the training on a
// thread of its own (LiveBackend): the policy prefetches, pre-evicts and
// discards while the UVM driver serves the faults. Without one the driver
// is alone (docs/torch.md says what is and is not built).
#ifndef UMLAB_BACKENDS_CUDA_TORCH_TORCH_SESSION_H_
#define UMLAB_BACKENDS_CUDA_TORCH_TORCH_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/gpu_balloon.h"
#include "backends/cuda/torch/launch_observer.h"
#include "backends/cuda/torch/live_backend.h"
#include "core/engine.h"
#include "core/policy.h"
#include "core/program_recorder.h"

namespace umlab::cuda {

struct TorchSessionOptions {
  int gpu = 0;
  // Device memory left free for managed memory; 0: no balloon.
  uint64_t capacity_bytes = 0;
  // Live managed bytes allowed (half the host's memory, by the caller).
  uint64_t host_limit_bytes = UINT64_MAX;
  // Pause between CUPTI flushes (docs/cuda.md: longer pauses lose records).
  int64_t flush_interval_ns = 1000000;
  // A policy spec (as --policy takes it) for the live engine; "" for none.
  std::string policy;
  // The device preset whose fault batch size and latency the engine uses.
  std::string device = "h200";
  // How often the engine thread looks for news.
  int64_t poll_interval_ns = 20000;
  // Record the training as a umlab program (core/program_recorder.h):
  // every launch's access set from its argument words, and each kernel's
  // time on the GPU. With a path the program is written there as a .umt
  // trace; without one the report still says how completely the access
  // sets explain the faults CUPTI saw.
  bool record = false;
  std::string record_path;
  std::string workload;  // names the recorded program (the script)
};

class TorchSession {
 public:
  static absl::StatusOr<std::unique_ptr<TorchSession>> Start(const TorchSessionOptions& options);
  ~TorchSession();

  // PyTorch's caching allocator handed a block out (`live`) or took it
  // back (torch_c_api.cc's umlab_torch_block_event); for the live engine.
  void OnBlock(bool live, uint64_t address, uint64_t bytes);
  // The training's iteration `index` starts now (iterations before the
  // first mark, and the mark's own index, are the caller's to define).
  void MarkIteration();
  // Stops and returns the report as one JSON object (docs/torch.md).
  std::string Report();

 private:
  struct Bin {
    uint64_t faults = 0;
    uint64_t fault_records = 0;
    uint64_t h2d_bytes = 0;
    uint64_t d2h_bytes = 0;
    uint64_t h2d_by_cause[6] = {};
    uint64_t d2h_by_cause[6] = {};
    uint64_t thrashing = 0;
    uint64_t throttled_ns = 0;
  };

  TorchSession() = default;
  void Drain();  // records gathered so far into their bins
  // Starts the live engine with options_.policy.
  absl::Status StartEngine();
  // Stops it and returns its report (a JSON object), or "null" without one.
  std::string StopEngine();
  // Times the recorded launches, measures their coverage of the faults,
  // writes the trace where asked; returns the report's "recording" object
  // (or "null" when not recording).
  std::string FinishRecording();

  TorchSessionOptions options_;
  std::unique_ptr<GpuBalloon> balloon_;
  std::unique_ptr<CuptiFaultStream> records_;
  std::unique_ptr<LaunchObserver> launches_;
  // The live engine (with a policy only): its backend, policy and thread.
  std::unique_ptr<LiveBackend> live_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Engine> engine_;
  std::thread engine_thread_;
  absl::Status engine_status_;
  std::thread flusher_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<UnifiedMemoryRecord> scratch_;
  // Bin 0: before the first mark; bin i: from mark i on.
  std::vector<uint64_t> marks_;          // CUPTI timestamps
  std::vector<uint64_t> mark_launches_;  // launches observed at each mark
  std::vector<Bin> bins_{1};
  uint64_t start_timestamp_ = 0;
  uint64_t free_after_balloon_ = 0;
  uint64_t block_events_ = 0;  // the caching allocator's, when traced
  // Recording (options_.record): the program so far, and what CUPTI said of
  // it. The recorder hears launches, blocks, segments and marks from
  // whichever thread makes them, in turn.
  std::mutex recorder_mutex_;
  std::unique_ptr<ProgramRecorder> recorder_;
  std::vector<KernelRecord> kernel_records_;
  std::vector<std::pair<uint64_t, uint64_t>> fault_points_;  // address, CUPTI time
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TORCH_TORCH_SESSION_H_
