// The cuda backend: the same engine and policies on a real GPU, through the
// UVM driver.
//
// The whole program is laid out before the timed run (replay_plan.h): its
// managed memory exists, every kernel's page list is in device memory, and
// then the kernels are launched back to back on one stream, with a bounded
// run-ahead as a framework's launch queue has and no host synchronisation
// between them. Each kernel stamps its begin and end from the GPU into
// host-mapped memory (replay_kernel.h).
//
// Two threads share the work. The launch thread (the caller's) only
// launches. The engine thread delivers each kernel's begin and end to the
// engine at the instants the GPU reports them, reads CUPTI's fault and
// transfer records, and issues what the engine and the policy decide
// (prefetches, evictions, discards) on a stream of their own: the engine
// never blocks the launch queue.
//
// Host kernels (KernelPlace::kHost) run on the launch thread, in stream
// order: it waits until the GPU has ended every kernel before, stamps the
// host kernel's begin (on the GPU's clock, through CUPTI's), waits until the
// engine thread has settled the kernel's claims (Engine::ClaimForHost), then
// touches every page of its accesses through the managed pointers (reading
// each page's first word and checking it against PageWriteCounts, or adding
// one to it as the replay kernel writes), spins out the rest of its CPU
// time, and stamps its end; the engine thread then releases the claims and
// delivers the end, and only then is the next kernel launched. How the
// pages leave the GPU depends on the memory mode: in `engine`, the engine's
// evictions are prefetches to the host, as all of its evictions are; in
// `driver`, the CPU's touches fault and the UVM driver migrates the pages
// itself, as it does for any CPU access, so the engine issues nothing for
// them and learns of the migrations from CUPTI (cause coherence).
//
// Two ways to run out of memory (CudaOptions::memory):
// - driver (real oversubscription): a cudaMalloc balloon leaves exactly the
//   capacity free, the driver evicts with its own policy when it runs out,
//   and the engine hears of those evictions from CUPTI's device-to-host
//   records; the policy still prefetches, pre-evicts and invalidates.
// - engine (budget): the GPU keeps its memory and the engine evicts to keep
//   residency within the capacity, as on the other backends.
#ifndef UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_
#define UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backends/cuda/csv_log.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/driver_calls.h"
#include "backends/cuda/driver_record_reader.h"
#include "backends/cuda/uvm_driver_backend.h"
#include "backends/cuda/gpu_balloon.h"
#include "backends/cuda/managed_segments.h"
#include "backends/cuda/page_write_counts.h"
#include "backends/cuda/replay_kernel.h"
#include "backends/cuda/replay_plan.h"
#include "backends/cuda/transfer_issuer.h"
#include "backends/cuda/uvm_event_queue.h"
#include "backends/cuda/uvm_tools_counters.h"
#include "core/access_pace.h"
#include "core/backend.h"
#include "core/device_config.h"
#include "core/engine.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

// In the order of the backend's `memory` choices.
enum class MemoryMode { kDriver, kEngine };

struct CudaOptions {
  int gpu = 0;                     // CUDA device ordinal
  MemoryMode memory = MemoryMode::kDriver;
  int run_ahead = 256;             // kernels launched ahead of the GPU
  Nanos poll_interval_ns = 20000;  // how often the engine thread looks for news
  // Pause between CUPTI flushes, which a thread of their own makes (each
  // costs about 2 ms on an H200: from the polling loop, flushing every 2 ms
  // made a run 20x slower).
  Nanos flush_interval_ns = 1000000;
  // Whether a flush also hands over buffers still being filled.
  bool forced_flush = false;
  size_t record_buffer_bytes = 64 << 10;  // each CUPTI record buffer
  // When set, every unified-memory record the engine hears is written here
  // as CSV (what the driver did: faults, transfers and their causes,
  // thrashing, throttling).
  std::string record_log;
  // When set, each kernel's accesses, issuers, compute time and GPU begin
  // and end stamps are written here as CSV at the end of the run (how the
  // replay kept to the compute time, kernel by kernel).
  std::string kernel_log;
  // When set, the engine thread writes here as CSV, every millisecond, how
  // many frames the engine's books hold and how much memory the GPU has
  // free (cudaMemGetInfo): where the engine's view of the device departs
  // from the driver's.
  std::string memory_log;
  // If set, each of the engine's calls (prefetch, eviction, discard) is
  // written to this CSV file, on the record log's clock (TransferIssuer::CallLog).
  std::string call_log;
  // memory=driver: whether the engine lets the driver make room for its
  // prefetches too (it always does for faults, which it hears of only after
  // the driver has evicted). Otherwise a prefetch into a full device first
  // evicts the policy's victim, through a second call to the driver.
  bool driver_room_for_prefetches = true;
  // memory=driver: what the balloon leaves free beyond the capacity, for
  // the driver's own use, so that managed data gets the whole capacity
  // (umlab_room_probe measures how many blocks fit).
  uint64_t driver_reserve_bytes = uint64_t{2} << 20;
  // Where the engine hears of the driver's transfers: the UVM driver's own
  // event queue, umlab's (uvm_event_queue.h), or CUPTI's records, which
  // lose some while pre-evictions run.
  enum class RecordSource { kUvm, kCupti };
  RecordSource transfers = RecordSource::kUvm;
  // Where it hears of the faults the driver serviced: the same queue's
  // fault events, one per fault, within a poll; or CUPTI's fault records,
  // one per group naming one address, late. CUPTI's records are counted
  // either way (faults, fault_records). Thrashing and throttling come from
  // CUPTI.
  RecordSource fault_records = RecordSource::kCupti;
  // When set, every migration the driver's event queue reports is written
  // here as CSV, whichever source the engine hears.
  std::string migration_log;
};

class CudaBackend final : public UvmDriverBackend {
 public:
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const DeviceConfig& device,
                                                             uint64_t capacity_frames,
                                                             const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) override;

  // Under memory=driver the UVM driver evicts for the faults it services,
  // and for the prefetches it is given where `driver_room` says so.
  bool MakesRoomFor(TransferKind arrival) const override {
    if (options_.memory != MemoryMode::kDriver) return false;
    return arrival == TransferKind::kFaultMigration || options_.driver_room_for_prefetches;
  }
  Nanos Now() const override;
  // memory=driver: the pages a host kernel claims leave the GPU when the
  // CPU touches them, not by a call (see the top of this file).
  void Evict(const Transfer& transfer) override;

  // What host kernels did: pages whose first word the CPU read (and, of
  // those, the ones whose count it could check) and pages it wrote.
  struct HostTouches {
    uint64_t pages_read = 0;
    uint64_t pages_checked = 0;
    uint64_t pages_written = 0;
  };
  HostTouches host_touches() const { return host_touches_; }

 private:
  CudaBackend(const DeviceConfig& device, uint64_t capacity_frames, const CudaOptions& options,
              uint64_t gpu_free_bytes);
  absl::Status Initialise();
  // Managed memory, page lists, counters and progress stamps for `plan_`,
  // then the balloon: everything the timed run needs, allocated before it.
  absl::Status Prepare();
  // The launch thread's loop.
  void LaunchAll();
  // Launch thread: host kernel `k`, from the wait for the kernels before it
  // to its end stamp. False when the run stops.
  bool RunHostKernel(uint64_t k);
  // Launch thread: the CPU's accesses of host kernel `k`, checked.
  absl::Status TouchFromHost(const PlannedKernel& kernel);
  // Launch thread: spins until `done` holds; false if the run stops first.
  template <typename Done>
  bool SpinUntil(Done done);
  // Engine thread: the claims of a host kernel that began, and whether they
  // have settled (telling the launch thread once they have).
  void ClaimForHost(const PlannedKernel& kernel);
  bool HostClaimsSettled(uint64_t k);
  // Now on the GPU's clock, for the stamps of host kernels.
  uint64_t GpuClockNow() const;
  // The engine thread's loop: progress, faults, completions, until the last
  // kernel has ended.
  void ServeEngine();
  // Writes one line of the memory log when a millisecond has passed since
  // the last (memory_log).
  void SampleMemory();
  // Delivers the program events [first, first + count) of the plan, which
  // come before kernel `next_kernel` (the kernel count after the last).
  void DeliverBetween(uint64_t first, uint64_t count, uint64_t next_kernel);
  // Takes the driver's queued events (its migrations, and its faults with
  // fault_records=uvm) into queue_events_, and into the migration log;
  // `flush` first has the driver report every finished migration.
  void DrainDriverQueue(bool flush);
  // DrainDriverQueue, then into records_ what the engine hears from the
  // queue: its transfers in place of CUPTI's transfer records
  // (transfers=uvm), and its fault events. `flush`: the run is ending.
  void TakeDriverQueue(bool flush);
  // Gathers CUPTI records, lets the engine service faults, and hands
  // finished transfers back to it.
  absl::Status Poll(bool flush);
  // The device copy of the program's `pages` of `block`, one span per run.
  std::vector<DriverCalls::Span> Spans(BlockNumber block, const PageMask& pages) const override;
  void FillStatistics();
  void LogKernels();
  // The replay kernel's issuers and step for one kernel (core/access_pace.h).
  AccessPace PaceOfKernel(const PlannedKernel& kernel) const;
  // Records the first error of either thread and stops both.
  void Fail(absl::Status status);
  bool stopping() const;
  // On SIGINT, fails the run (both threads stop) and returns true.
  bool StopIfInterrupted();

  DeviceConfig device_;
  CudaOptions options_;
  uint64_t capacity_frames_;
  uint64_t gpu_free_bytes_;  // free when the backend was created
  ReplayPlan plan_;
  ManagedSegments segments_;
  std::unique_ptr<GpuBalloon> balloon_;
  std::unique_ptr<CuptiFaultStream> cupti_;
  // The driver's own byte counters (none where its tools device is not
  // available), read when the run starts and ends.
  std::unique_ptr<UvmToolsCounters> uvm_counters_;
  UvmToolsCounters::Bytes uvm_at_start_, uvm_at_end_;
  // The driver's event queue (none where its tools device is not
  // available), and whether the engine hears its transfers from it.
  std::unique_ptr<UvmEventQueue> uvm_events_;
  bool transfers_from_uvm_ = false;
  bool faults_from_uvm_ = false;
  std::vector<UnifiedMemoryRecord> queue_events_;
  CsvLog migration_log_ = NoCsvLog();
  uint32_t current_exec_id_ = 0;
  EventSink* recorder_ = nullptr;

  // Set once by either thread; read by both.
  std::atomic<bool> stop_{false};
  std::mutex error_mutex_;
  absl::Status error_;

  cudaStream_t compute_stream_ = nullptr;
  cudaStream_t migration_stream_ = nullptr;

  // Device memory: every kernel's ranges, and its counters (zeroed).
  DeviceRange* device_ranges_ = nullptr;
  KernelCounters* counters_ = nullptr;
  // Host-mapped: what the GPU stamps as kernels begin and end.
  KernelProgress* progress_ = nullptr;

  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> flusher_done_{false};
  uint64_t cupti_start_ = 0;
  uint64_t cupti_minus_gpu_ns_ = 0;         // CUPTI's clock minus the GPU's
  std::vector<uint64_t> iteration_first_kernel_;  // per iteration marker
  std::vector<UnifiedMemoryRecord> records_;

  // Host kernels. The engine thread's: the pages the running one claims,
  // and when it claimed them. Between the threads: the index of the host
  // kernel whose claims last settled (kNoKernel: none yet). The launch
  // thread's: the counts its reads are checked against, and what it did.
  static constexpr uint64_t kNoKernel = UINT64_MAX;
  absl::flat_hash_map<BlockNumber, PageMask> host_claimed_;
  Nanos host_claimed_at_ = 0;
  std::atomic<uint64_t> host_settled_{kNoKernel};
  PageWriteCounts page_writes_;
  HostTouches host_touches_;

  // The driver's records: faults, its own evictions, traffic per iteration.
  DriverRecordReader driver_records_;
  CsvLog kernel_log_ = NoCsvLog();
  CsvLog memory_log_ = NoCsvLog();
  CsvLog call_log_ = NoCsvLog();
  Nanos next_memory_sample_ = 0;
  uint64_t overshoot_max_frames_ = 0;
  uint64_t overshoot_sum_frames_ = 0;
  uint64_t overshoot_samples_ = 0;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CUDA_BACKEND_H_
