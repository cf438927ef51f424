// What the unified-memory records (CUPTI's; on the cuda backend the
// transfers come from the driver's own event queue, uvm_event_queue.h)
// tell the engine about the UVM driver, which serves faults and evicts by
// itself: the blocks it brought in
// (reported to the engine as faults on every page of the block, since a
// record names one address of a fault group and the driver fills the block
// around it) and, under real oversubscription, the blocks it evicted on its
// own, and the pages a CPU's touch took back to the host (a host kernel's;
// the driver migrates them for coherence, page by page, in either memory
// mode). It also keeps the driver's traffic, binned by iteration, and
// writes the record log (records=FILE).
//
// Shared by the cuda backend, which replays a program, and the live
// PyTorch backend (backends/cuda/torch/live_backend.h), which watches one.
#ifndef UMLAB_BACKENDS_CUDA_DRIVER_RECORD_READER_H_
#define UMLAB_BACKENDS_CUDA_DRIVER_RECORD_READER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "backends/cuda/csv_log.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/transfer_ledger.h"
#include "core/engine.h"
#include "core/run_stats.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

class DriverRecordReader {
 public:
  // The program's address of a managed address, if it is the program's.
  using ToProgram = std::function<std::optional<uint64_t>(uint64_t managed_address)>;
  // `driver_evicts`: the driver runs out of memory by itself (memory=driver),
  // so its eviction records change the engine's books.
  DriverRecordReader(bool driver_evicts, ToProgram to_program);

  // Whether the engine hears of faults from the driver's own queue
  // (fault events, which name every fault within a poll) rather than from
  // CUPTI's fault records (which name one address of a group, late); the
  // latter are still counted (faults, fault_records) and logged ("counted").
  void HearFaultsFromEvents(bool from_events) { faults_from_events_ = from_events; }

  // Opens the record log; "" for none.
  absl::Status OpenLog(const std::string& path);
  // The run starts now, on CUPTI's clock: times in the log count from here,
  // and what came before lands in bin 0.
  void Start(uint64_t cupti_start);
  // An iteration begins at `cupti_timestamp`: a new bin from there on.
  void MarkIteration(uint64_t cupti_timestamp);

  // Reads records (sorting them by start time): the driver's evictions go to
  // the engine at once; the blocks the driver brought in go into `faults`,
  // every page, named `exec_id` and stamped `now`. `on_fault` (if set) hears
  // each fault record in the program's memory, by its program address and
  // CUPTI start time. Returns how many of the faulted blocks the engine held
  // no frame for.
  uint64_t Read(std::vector<UnifiedMemoryRecord>& records, Engine& engine, FaultBuffer& faults,
                uint32_t exec_id, Nanos now,
                const std::function<void(uint64_t program_address, uint64_t start_ns)>& on_fault);

  // Transfers that ended after the engine had finished (the last of its
  // calls, drained after its final poll): counted in the traffic and the
  // log, told to no engine.
  void CountTrailing(const std::vector<UnifiedMemoryRecord>& records);

  // One of the policy's prefetches into `block` was seen finished at
  // `cupti_timestamp`: an eviction record of the block that began before
  // then is stale (the block has been refilled) and is not applied.
  void NoteRefill(BlockNumber block, uint64_t cupti_timestamp);

  // Faults, traffic and the record counts as CUPTI measured them, total and
  // per iteration (bin i + 1 is iteration i).
  void FillStatistics(RunStats& stats) const;

 private:
  struct Bin {
    uint64_t faults = 0, h2d = 0, d2h = 0;
  };
  size_t BinOf(uint64_t cupti_timestamp) const;
  // Applies a driver eviction of `pages` of `block` begun at `began_ns`
  // (all of them: the whole block, as the driver evicts 2 MB chunks),
  // unless it is stale or none of them is the engine's to lose; says which
  // ("applied", "stale", "not_resident", "in_flight").
  const char* ApplyDriverEviction(Engine& engine, BlockNumber block, const PageMask& pages,
                                  uint64_t began_ns);
  // Adds a transfer record to the traffic: its bin, the calls' share and
  // the ledger.
  void CountTransfer(const UnifiedMemoryRecord& record, const std::optional<uint64_t>& address);
  // Whether the driver began evicting `block` after `time_ns`, as far as
  // the records read so far tell: an arrival reported at `time_ns` is over.
  bool LeftSince(BlockNumber block, uint64_t time_ns) const;
  void Log(const UnifiedMemoryRecord& record, const std::optional<uint64_t>& program,
           uint64_t delivered_ns, const char* outcome);

  const bool driver_evicts_;
  const ToProgram to_program_;
  bool faults_from_events_ = false;
  CsvLog log_ = NoCsvLog();
  uint64_t cupti_start_ = 0;
  std::vector<uint64_t> iteration_starts_;  // CUPTI timestamps
  std::vector<Bin> bins_{1};
  absl::flat_hash_map<BlockNumber, uint64_t> refilled_at_;
  // When the driver last began evicting each block (its eviction records).
  absl::flat_hash_map<BlockNumber, uint64_t> left_at_;
  uint64_t fault_records_ = 0;
  uint64_t fault_events_ = 0;  // in the program's memory
  uint64_t thrashing_detections_ = 0;
  uint64_t throttled_ns_ = 0;
  uint64_t stale_evictions_ = 0;
  // Bytes the engine's own calls moved (records of cause user).
  uint64_t call_h2d_ = 0;
  uint64_t call_d2h_ = 0;
  // Every transfer in the program's memory, for what CUPTI left out.
  TransferLedger ledger_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_DRIVER_RECORD_READER_H_
