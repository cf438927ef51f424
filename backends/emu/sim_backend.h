// The sim backend: runs a workload program on the device model in
// deterministic virtual time.
//
// Within a kernel, `sms` simulated SMs take the kernel's page accesses in
// program order from a shared cursor, each computing for the same step
// after every access (core/access_pace.h), and the grid then winds down
// (DeviceConfig::kernel_grid_ns). An access to an unmapped page puts
// an entry in the fault buffer and stalls that SM until a replay lets it
// retry. Faults are serviced by the engine; transfers cross the modelled
// PCIe link and overlap compute. Kernels run back to back on one stream.
//
// Where the policy acts (SimOptions::policy_from):
// - driver (the default): inside the driver's fault handler, as DeepUM's
//   kernel module does. The engine chooses every victim, evictions write
//   back only dirty pages, and the policy's prefetches and pre-evictions
//   move as soon as the link has room, after the faults.
// - user: from user space over an unmodified driver, as the cuda backend
//   runs it (`--backend=cuda:memory=driver`). The driver serves faults by
//   itself: a second engine, with the policy that models the driver's own
//   fault service (`driver`, by default demand: the faulted pages), fetches
//   the fault buffer, batches, migrates and replays. The
//   device makes room for every arrival with the driver's own victim (the
//   block that arrived longest ago) and writes back every page it holds,
//   since the driver keeps no dirty bits. The run's engine, with the
//   policy, hears of the driver's work as the cuda backend does, from
//   CUPTI's records: the blocks the driver copied in, the blocks its fault
//   batches' records name (a populate makes no transfer record) and its
//   evictions reach it only at flush instants (every `flush_us` plus the
//   flush's own `flush_cost_us`), once CUPTI has collected them from the
//   driver (every `collect_us`) into a buffer that is full (`buffer_kb`;
//   CuptiRecordStream), and its fault service completes at once, the data
//   being there already. The policy's
//   prefetches and pre-evictions are driver calls made one at a time, in
//   order, from one host thread, and cost their copy only (the driver's
//   eviction overhead is its fault path's); and the driver does one thing
//   at a time in the order it was asked, with no priority for faults
//   (measured on the H200: docs/fidelity.md).
//
// Same program, device, capacity and policy: byte-identical results.
#ifndef UMLAB_BACKENDS_EMU_SIM_BACKEND_H_
#define UMLAB_BACKENDS_EMU_SIM_BACKEND_H_

#include <cstdint>
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "backends/emu/copy_stream.h"
#include "backends/emu/cupti_record_stream.h"
#include "core/access_span.h"
#include "core/backend.h"
#include "core/engine.h"
#include "core/event_sink.h"
#include "core/event_source.h"
#include "core/kernel_assembler.h"
#include "emu/device_presets.h"
#include "emu/device_memory.h"
#include "emu/fault_buffer.h"
#include "emu/fault_write_path.h"
#include "emu/g10_fault_model.h"
#include "emu/pcie_link.h"
#include "emu/virtual_clock.h"

namespace umlab {

struct SimOptions {
  // The policy acts from user space over a modelled unmodified driver
  // (`policy_from=user`), not inside the driver.
  bool policy_from_user = false;
  // User mode: CUPTI's delivery of the driver's records to the engine, as
  // the cuda backend's flusher thread runs it (backends/emu/cupti_record_stream.h;
  // the defaults are the H200's), whose flushes hand over only full buffers.
  CuptiRecordStreamConfig cupti;
  // User mode: whether the engine hears the driver's transfers (its copies
  // in and its evictions) from the driver's own event queue, within one
  // poll of `poll_ns`, as the cuda backend does by default (transfers=uvm,
  // backends/cuda/uvm_event_queue.h); or from CUPTI's records, late, as it
  // does with transfers=cupti. Fault records come through CUPTI either way,
  // and CUPTI's buffers still fill with the transfer records too.
  bool transfers_from_queue = true;
  // User mode: whether the engine hears of the faults the driver serviced
  // from the same queue, every fault of a batch as its service begins,
  // within a poll (the cuda backend's fault_records=uvm); or from CUPTI's
  // fault records, one per batch naming its first fault, through CUPTI's
  // collections, buffers and flushes (fault_records=cupti, what
  // populate_records shapes). CUPTI's buffers fill with its fault records
  // either way.
  bool faults_from_queue = false;
  // User mode: what a pre-eviction that writes part of a block back and
  // discards the rest leaves on the device. On the H200 the discarded pages
  // stay: the block keeps its frame until the driver evicts it, and that
  // eviction writes them back (the record logs of bert-base and resnet50
  // under deepum, docs/fidelity.md, "What a partial discard leaves"). A
  // discard of the whole block frees it. False: the discarded pages go
  // with the call, as they did in the model before.
  bool partial_discards_stay = true;
  Nanos poll_ns = 20000;
  // User mode: the policy spec that models the driver's own fault service.
  // The driver's tree prefetcher runs under every policy on the GPU (three
  // quarters of its fault-path bytes are its own); with it the driver makes
  // about as many fault batches as the GPU makes fault records, and the
  // engine hears, misses and acts as the GPU's does (docs/fidelity.md).
  std::string driver_policy = "uvm-default";
  // User mode: which of the driver's fault migrations CUPTI records. A copy
  // makes a transfer record. A populate (pages with no data anywhere:
  // first touch, or after a discard) makes none, only the fault record of
  // its fault batch, which names one address, the batch's first fault: a
  // block populated beside it is never heard of (kFirstFault, what the
  // H200's records show: docs/fidelity.md). kAll records every migration.
  enum class PopulateRecords { kFirstFault, kAll };
  PopulateRecords populate_records = PopulateRecords::kFirstFault;
  // How a kernel's issuers walk its pages. Ordered (the default): every
  // issuer takes the next page of the kernel's accesses in order, as
  // umlab's replay kernel does on the GPU, so the faults at any instant lie
  // in one or two blocks. Spread: each issuer walks its own equal slice, as
  // a real kernel's thread blocks partition its tensors, so a kernel's
  // first faults land in as many places as it has issuers and one fault
  // batch names many blocks (docs/fidelity.md, "Real PyTorch trainings").
  bool spread_access = false;
  // How faults cost time (`faults=`). Batched, the default: the mechanism
  // above, SMs stalled until the fault batch that holds their page is
  // fetched (fault_latency_ns later) and its migrations land. G10: G10's
  // simulator's model (its KernelBeginEvent and performance_model), which
  // charges each kernel a fault time computed from that kernel's own
  // measured times (kKernelFaultTimes) in proportion to its missing pages;
  // every missing page of the kernel faults at its start, migrations run at
  // the link's pace with no batch latency, and the kernel ends when both
  // its charged time and its last page are in (docs/g10.md). kG10 reads the
  // times as the artifact's arithmetic does (what G10's published figures
  // used), kG10Measured as the paper describes (emu/g10_fault_model.h).
  enum class FaultModel { kBatched, kG10, kG10Measured };
  FaultModel fault_model = FaultModel::kBatched;
  bool g10_faults() const { return fault_model != FaultModel::kBatched; }
};

class SimBackend final : public Backend {
 public:
  SimBackend(const DeviceConfig& device, uint64_t capacity_frames,
             const SimOptions& options = SimOptions{});

  // Backend.
  std::string name() const override { return "sim"; }
  absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) override;
  // The device's page table against the engine's view.
  absl::Status CheckConsistency(const Engine& engine) const override;
  ~SimBackend() override;
  void SetListener(TransferListener* listener) override { listener_ = listener; }
  size_t FetchFaults(absl::Span<FaultEntry> out) override;
  void Migrate(const Transfer& transfer) override;
  void Evict(const Transfer& transfer) override;
  void Invalidate(BlockNumber block, const PageMask& pages) override;
  PageUse QueryUse(BlockNumber block) const override;
  bool MakesRoomFor(TransferKind /*arrival*/) const override {
    return options_.policy_from_user;
  }
  bool CountsItsOwnTraffic() const override { return options_.policy_from_user; }
  bool ChargesFaultsPerKernel() const override {
    return options_.g10_faults();
  }
  // Remote mappings are modelled where the device runs the kernel's
  // accesses itself: not under G10's fault model (which moves every page
  // in before a kernel runs) nor in user mode (the driver's model).
  bool MapsRemotely() const override {
    return !options_.g10_faults() && !options_.policy_from_user;
  }
  // The sim holds no data: `fresh` pages need nothing.
  void MapRemote(BlockNumber block, const PageMask& pages, const PageMask& fresh) override;
  void UnmapRemote(BlockNumber block, const PageMask& pages) override;
  void Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) override;
  Nanos Now() const override { return clock_.now(); }

  const DeviceMemory& device_memory() const { return device_memory_; }

 private:
  // Virtual time inside a kernel is kept in picoseconds so that spreading a
  // kernel's compute over many accesses does not accumulate rounding.
  using Picos = int64_t;
  static constexpr Picos kPicosPerNano = 1000;

  // An access's pages, and the bytes a remote access moves of each.
  struct AccessRange : AccessSpan {
    bool write;
  };
  // Where an issuer is in the kernel's pages: ranges_[range] at `offset`,
  // with `left` pages of its share to go. Ordered access shares cursor 0.
  struct Cursor {
    size_t range = 0;
    uint64_t offset = 0;
    uint64_t left = 0;
  };
  struct Sm {
    bool retry = false;  // woken by a replay: retry `page` first
    bool wakes_now = false;  // scratch for ApplyReplay
    PageNumber page = 0;
    bool write = false;
    uint64_t bytes = 0;  // of `page`, what the access touches
    Picos stalled_since = 0;
  };
  struct ReplayEvent {
    Nanos time;
    uint64_t sequence;
    ReplayPolicy policy;
    BlockNumber block;
    bool operator>(const ReplayEvent& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  using ReadySm = std::pair<Picos, uint32_t>;  // (time, SM), ordered by both

  // The SMs ready to issue, in time order. An SM that finishes an access at
  // t goes back at t + per_access; SMs are taken in time order and every
  // running SM spends the same per_access, so those re-entries arrive in
  // order and a ring keeps them sorted at O(1). SMs woken by a replay come
  // in sorted batches (PushWoken), almost always later than every woken SM
  // still waiting, so a second sorted FIFO holds them, merged on the rare
  // overlap: both pop in O(1), where a heap cost a log per woken SM.
  class ReadySms {
   public:
    bool empty() const { return running_size_ == 0 && woken_empty(); }
    const ReadySm& top() const {
      if (woken_empty()) return running_[running_head_];
      if (running_size_ == 0) return woken_[woken_head_];
      return std::min(running_[running_head_], woken_[woken_head_]);
    }
    void pop() {
      if (!woken_empty() &&
          (running_size_ == 0 || woken_[woken_head_] < running_[running_head_])) {
        if (++woken_head_ == woken_.size()) {
          woken_.clear();
          woken_head_ = 0;
        }
      } else {
        if (++running_head_ == running_.size()) running_head_ = 0;
        --running_size_;
      }
    }
    // Each SM is in the queue at most once, so `sms` slots always suffice.
    void PushAfterAccess(Picos time, uint32_t sm) {
      size_t tail = running_head_ + running_size_;
      if (tail >= running_.size()) tail -= running_.size();
      running_[tail] = ReadySm(time, sm);
      ++running_size_;
    }
    // `batch` must be sorted.
    void PushWoken(const std::vector<ReadySm>& batch) {
      if (batch.empty()) return;
      const size_t middle = woken_.size();
      woken_.insert(woken_.end(), batch.begin(), batch.end());
      if (middle > woken_head_ && batch.front() < woken_[middle - 1]) {
        std::inplace_merge(woken_.begin() + woken_head_, woken_.begin() + middle,
                           woken_.end());
      }
    }
    // The bulk path: true if the next SM in order is a running one (not one
    // woken by a replay) whose time is at most `limit`.
    bool RunningNextAtOrBefore(Picos limit) const {
      if (running_size_ == 0) return false;
      const ReadySm& front = running_[running_head_];
      return front.first <= limit && (woken_empty() || front < woken_[woken_head_]);
    }
    void Reset(size_t sms) {
      running_.assign(sms, ReadySm(0, 0));
      running_head_ = 0;
      running_size_ = 0;
      woken_.clear();
      woken_head_ = 0;
    }

   private:
    bool woken_empty() const { return woken_head_ == woken_.size(); }

    std::vector<ReadySm> running_;  // a ring of `sms` slots
    size_t running_head_ = 0;
    size_t running_size_ = 0;
    std::vector<ReadySm> woken_;  // sorted from woken_head_ on
    size_t woken_head_ = 0;
  };

  absl::Status ExecuteKernel(uint32_t exec_id, Nanos compute_ns);
  // ExecuteKernel's work, with kernel_running_ set around it.
  absl::Status ExecuteKernelAccesses(uint32_t exec_id, Nanos compute_ns);
  // The G10 fault model's kernel (SimOptions::FaultModel::kG10).
  absl::Status ExecuteKernelG10(uint32_t exec_id, Nanos compute_ns);
  // G10 model: raises a fault for each page of the kernel's ranges that is
  // neither mapped, landing nor already waited for, and waits for all of
  // them; counts the faults by input/output and source into `counts`
  // unless it is null.
  void RaiseMissingPages(G10KernelFaults* counts);
  // G10 model, with nothing left to happen: raises the pages the kernel
  // waits for that nothing will bring (a queued prefetch the engine
  // dropped). Whether it raised any.
  bool RaiseStrandedPages();
  // G10 model: whether page `index` of `block` comes in with no fault of
  // the kernel's: a migration brings it, or a prefetch for it waits in the
  // engine's queue (G10 marks a page in transfer once its prefetch is
  // queued). `state` is the engine's record of the block (may be null).
  bool ArrivesWithoutFault(const BlockState* state, BlockNumber block, int index) const;
  // G10 model: whether the running kernel waits for the page and no fault
  // for it is raised and not yet fetched.
  bool AwaitedButNotRaised(BlockNumber block, int index) const;
  void RaiseG10Fault(PageNumber page, bool write);
  // G10 model: pages of `block` that landed leave the kernel's wait.
  void NoteLanded(BlockNumber block);
  // Moves the kernel's access cursor `pages` pages on.
  void AdvanceCursor(Cursor& cursor, uint64_t pages);
  // Processes system events (link, replays, fault service) up to `until`
  // inclusive; returns false if none was due.
  bool ProcessSystemEventAtOrBefore(Nanos until);
  Nanos NextSystemEventTime() const;
  void ApplyReplay(const ReplayEvent& replay);
  // The flush before a batch's replay (DeviceConfig::replay_flush).
  void FlushBeforeReplay();
  // The fault server's fetch from the fault buffer. Under the driver's
  // flush the server takes no batch while the last one's replay waits (the
  // driver fetches the next batch after the replay).
  size_t FetchFromFaultBuffer(absl::Span<FaultEntry> out);
  // The fault server fetches at `at` (the next system event then).
  void RequestService(Nanos at);
  // After each batch fetched: fails the run once batches have gone on for
  // long with no access completing (a livelock, not a slow run).
  void CheckProgress();
  // Replay on behalf of whichever engine serves the faults (Replay() is
  // the run's engine's, which in user mode serves none).
  void ScheduleReplay(ReplayPolicy policy, BlockNumber block, Nanos not_before);
  void Fault(uint32_t sm, PageNumber page, bool write, Picos now);
  // An SM's access to `bytes` of a remotely mapped page: the bytes cross
  // the link at the remote rate, beside the migrations, and the SM waits
  // for them (and the round trip), or for its own compute if longer,
  // until `computed`.
  void AccessRemotely(uint32_t sm, uint64_t bytes, bool write, Picos now, Picos computed);
  // The SMs whose remote accesses completed at this instant go back to
  // the ready queue.
  void WakeRemoteAccessors(const std::vector<TransferId>& completed);
  // The engine that serves the fault buffer: the driver's in user mode.
  Engine& FaultServer() { return driver_ != nullptr ? *driver_ : *engine_; }
  absl::Status AdvanceIdle(Nanos until);
  // Runs a host kernel (KernelPlace::kHost): its pages leave the device
  // (Engine::ClaimForHost), then the CPU computes for its duration while
  // the link and the engine go on; `program_event` passes its begin and end
  // to the engines.
  absl::Status ExecuteHostKernel(const KernelAssembler& kernel,
                                 absl::FunctionRef<void(const Event&)> program_event);
  // The host touches [address, address+size) of memory.
  struct HostAccess {
    uint64_t address;
    uint64_t size;
    bool write;
  };
  // The host's accesses to memory, for `duration` of CPU time: writes wait
  // for the copies whose sources they overwrite; the managed pages among
  // them leave the device first (Engine::ClaimForHost), and `claimed`
  // runs once they are claimed, before the wait for them (a host kernel
  // passes its begin to the engines there). `who` names it in errors.
  absl::Status AccessFromHost(absl::Span<const HostAccess> accesses, Nanos duration,
                              const std::string& who, absl::FunctionRef<void()> claimed);
  // The program issues a copy (kCopy): run as the policy says, the host
  // waiting for it if it is synchronous.
  absl::Status RunCopy(const Event& event);
  // Kernel `exec_id` waits for the copies before it (CopyStream::MayLaunch).
  absl::Status AwaitLaunch(uint32_t exec_id, absl::Span<const Event> accesses);
  // Processes system events until done() holds (a deadlock, named by
  // `what`, if nothing is left to happen first). WaitForCopies counts the
  // time in copy_wait_ns.
  absl::Status WaitUntil(absl::FunctionRef<bool()> done, const std::string& what);
  absl::Status WaitForCopies(absl::FunctionRef<bool()> done, const std::string& what);
  // Hands a transfer to the link (user mode: the device first makes room
  // for an arriving block). Returns the bytes it moves: 0 for one that waits
  // for room, and never those of the driver's eviction that makes room.
  uint64_t Submit(const Transfer& transfer);
  // User mode: the driver evicts the block that arrived longest ago and
  // holds no transfer, writing back every page it maps, and tells the
  // engine. Returns the eviction's link id.
  TransferId EvictForRoom(BlockNumber arriving);
  // User mode: the next policy call, once the previous one has finished.
  void IssueNextCall();
  void NoteArrival(BlockNumber block);
  void ForgetIfUnmapped(BlockNumber block);
  // User mode: the driver engine's migration (DriverPort::Migrate).
  void SubmitDriverMigration(const Transfer& transfer);
  // User mode: CUPTI records the driver bringing `block` in, as
  // `cupti_records` of its records; the engine will hear of every page of
  // it, as the cuda backend reports a named block.
  void RecordArrival(BlockNumber block, uint64_t cupti_records = 1);
  // User mode: the driver moved `pages` of `block` (an arrival or an
  // eviction), as `cupti_records` of CUPTI's records; the engine hears it
  // from the driver's event queue or from CUPTI (SimOptions::transfers_from_queue).
  void RecordTransfer(CuptiRecordStream::Record::Kind kind, BlockNumber block,
                      const PageMask& pages, uint64_t cupti_records);
  // User mode: the driver fetched the fault batch `batch`: CUPTI's fault
  // record names the block of its first fault, the driver's queue every
  // block of it (SimOptions::faults_from_queue).
  void RecordFaultBatch(absl::Span<const FaultEntry> batch);
  // User mode: `unmapped` pages of `block` have left the device; those of
  // them a pre-eviction had discarded are no longer there either.
  void ForgetDiscardedOnDevice(BlockNumber block, const PageMask& unmapped);
  // User mode: an eviction call of `pages` takes back those of them still
  // on their way to the device; returns them.
  PageMask CatchLanding(BlockNumber block, const PageMask& pages);
  // User mode: the block's pages on their way to the device; forgetting
  // some of them; and keeping an unmapped block's frame while pages land.
  PageMask Landing(BlockNumber block) const;
  void ForgetLanding(BlockNumber block, const PageMask& pages);
  void KeepFrameWhileLanding(BlockNumber block);
  // User mode: hands the run's engine the records of `stream` that a flush
  // starting at `flush_start` hands over, in time order, as the cuda
  // backend does.
  void DeliverRecords(CuptiRecordStream& stream, Nanos flush_start);
  // User mode: whether an arrival record, when it is delivered, tells the
  // engine of pages it does not know are there.
  bool TellsOfArrival(const CuptiRecordStream::Record& arrival) const;
  void ForgetQueuedEviction(BlockNumber block);
  // User mode: the driver evicted `block` while the policy's pre-evictions
  // of it were still queued; they complete having moved nothing.
  void VoidQueuedEvictions(BlockNumber block);

  DeviceConfig device_;
  SimOptions options_;
  VirtualClock clock_;
  DeviceMemory device_memory_;
  FaultBuffer fault_buffer_;
  FaultWritePath fault_writes_;
  PcieLink link_;
  // The program's DMA and hidden copies, on the stream they share with its
  // kernels.
  CopyStream copies_;
  // A device kernel's accesses are running (the blank-page check).
  bool kernel_running_ = false;
  TransferListener* listener_ = nullptr;
  Engine* engine_ = nullptr;
  EventSink* recorder_ = nullptr;
  absl::Status error_;

  absl::flat_hash_map<TransferId, Transfer> transfers_;
  std::priority_queue<ReplayEvent, std::vector<ReplayEvent>, std::greater<>> replays_;
  uint64_t replay_sequence_ = 0;
  int batch_replays_waiting_ = 0;  // in replays_, not per block
  // A batch's replay woke SMs that have not retried yet (replay_flush=driver).
  bool retries_owed_ = false;
  static constexpr int kBatchesWithoutProgressLimit = 10000;
  int batches_without_progress_ = 0;
  uint64_t accesses_at_last_batch_ = 0;
  bool service_requested_ = false;
  Nanos service_time_ = 0;

  // The kernel being executed.
  std::vector<AccessRange> ranges_;
  std::vector<Cursor> cursors_;
  uint32_t exec_id_ = 0;
  std::vector<Sm> sms_;
  std::vector<uint32_t> stalled_;
  std::vector<ReadySm> woken_scratch_, woken_later_;
  ReadySms ready_;
  Picos stall_picos_ = 0;
  std::vector<TransferId> completed_scratch_;

  // Remote accesses on the link, by their link id (from a range of their
  // own): the SM waiting, and when its compute for them is done.
  struct RemoteWait {
    uint32_t sm;
    Picos computed;
  };
  absl::flat_hash_map<TransferId, RemoteWait> remote_waits_;
  TransferId next_remote_access_ = TransferId{1} << 61;
  std::vector<ReadySm> remote_woken_;

  // G10 fault model. Each kernel's times with faults, by execution id
  // (PF, InputPF), and the faults raised for the running kernel that the
  // engine has yet to fetch (G10's fault queues are unbounded, so they
  // bypass the fault buffer), with the pages among them per block.
  absl::flat_hash_map<uint32_t, std::pair<Nanos, Nanos>> fault_times_;
  std::deque<FaultEntry> raised_;
  absl::flat_hash_map<BlockNumber, PageMask> raised_pages_;
  // The running kernel's pages not yet mapped (raised or on their way), per
  // block, and the pages of the batch the engine fetched last, which fault
  // again at its replay if it could not service them.
  absl::flat_hash_map<BlockNumber, PageMask> waiting_;
  std::vector<FaultEntry> fetched_;
  // G10 model: each block's evictions on the link, with their pages. G10
  // moves 4 KB pages, not blocks, and gives an evicted page's frame to the
  // arriving page at once (its batches move pages out and in side by
  // side), so an arrival waits only for an eviction of the same pages'
  // data: never for the one that frees a frame, nor for a neighbour's
  // write-back queued in the same block.
  struct Evicting {
    TransferId id;
    PageMask pages;
  };
  absl::flat_hash_map<BlockNumber, std::vector<Evicting>> evicting_;

  // User mode. Transfers submitted and not finished, per block: the driver
  // never evicts a block with a call or a copy pending.
  absl::flat_hash_map<BlockNumber, int> pending_per_block_;
  // Of those, pre-eviction calls still queued on the host.
  absl::flat_hash_map<BlockNumber, int> queued_evictions_;
  // The driver's eviction order: blocks by arrival (oldest first).
  std::map<uint64_t, BlockNumber> arrival_order_;
  absl::flat_hash_map<BlockNumber, uint64_t> arrival_of_;
  uint64_t next_arrival_ = 0;
  // Arrivals on their way that hold no device frame yet.
  absl::flat_hash_set<BlockNumber> arriving_;
  // The policy's calls, waiting for the host thread, and the one running.
  std::deque<Transfer> calls_;
  TransferId call_running_ = 0;
  // Ids of the driver's own transfers on the link (from the top of the
  // range, so they never meet the engine's).
  TransferId next_device_transfer_ = TransferId{1} << 62;
  // The driver's own evictions on the link, and their blocks.
  absl::flat_hash_map<TransferId, BlockNumber> device_evictions_;
  // Arrivals that found every block on the device busy; retried whenever a
  // transfer finishes.
  std::deque<Transfer> waiting_for_room_;

  // User mode: the driver. Its engine serves the fault buffer through the
  // port, with the driver's fault policy; its fault migrations go on the
  // link under ids of the device's own, mapped here to the driver engine's.
  class DriverPort;
  std::unique_ptr<DriverPort> driver_port_;
  std::unique_ptr<Policy> driver_policy_;
  std::unique_ptr<Engine> driver_;
  absl::flat_hash_map<TransferId, TransferId> driver_migrations_;
  // Pages each arrival on the link actually moves (those neither mapped nor
  // already on their way when it was submitted), and per block the pages
  // on their way and the last transfer bringing some.
  absl::flat_hash_map<TransferId, PageMask> moving_;
  absl::flat_hash_map<BlockNumber, PageMask> landing_;
  absl::flat_hash_map<BlockNumber, TransferId> last_landing_;
  // Pages an eviction call took back from an arrival still on the link.
  absl::flat_hash_map<TransferId, PageMask> caught_;
  // When a policy's call last landed pages in each block.
  absl::flat_hash_map<BlockNumber, Nanos> call_arrival_;
  uint64_t stale_eviction_records_ = 0;  // records call_arrival_ outdated
  // What CUPTI records for the run's engine: blocks the driver brought in,
  // blocks it evicted, and the policy's own calls, until delivered.
  CuptiRecordStream records_;
  // The driver's event queue, drained at every poll (transfers_from_queue).
  CuptiRecordStream queue_records_;
  // When the engine last heard that the driver began evicting each block.
  absl::flat_hash_map<BlockNumber, Nanos> left_at_;
  // The blocks of the driver's current batch that the engine will hear of
  // (the first fault's, or with faults_from_queue every one), and the
  // blocks the driver has populated since a record last named them: the
  // engine's books cannot know those pages.
  absl::flat_hash_set<BlockNumber> batch_named_blocks_;
  absl::flat_hash_set<BlockNumber> unheard_;
  // User mode: pages a pre-eviction discarded that stay on the device
  // (partial_discards_stay), which the engine's books no longer hold.
  absl::flat_hash_map<BlockNumber, PageMask> discarded_on_device_;
  // Delivered faults the run's engine has yet to fetch, and its fault
  // migrations (complete at once) waiting to be told so.
  std::deque<FaultEntry> delivered_;
  std::vector<TransferId> completed_now_;
  // What the device moved, as CUPTI counts it: the run's traffic in user mode.
  uint64_t moved_h2d_bytes_ = 0;
  uint64_t moved_d2h_bytes_ = 0;
  // Of those, what the run's engine's calls moved.
  uint64_t call_h2d_bytes_ = 0;
  uint64_t call_d2h_bytes_ = 0;
  uint64_t raised_faults_ = 0;
  // Those counts at each iteration's start, for the per-iteration figures.
  struct DeviceCounts {
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t faults;
  };
  std::vector<DeviceCounts> iteration_marks_;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_SIM_BACKEND_H_
