// The fault-service engine: the UVM driver's pipeline, backend-independent.
//
//   1. Fetch up to `batch_size` raw entries from the backend's fault buffer.
//   2. Preprocess: drop duplicates, group by 2 MB block, order by address.
//   3. For each faulted block: find a frame (evicting the policy's victim,
//      writing back dirty pages and dropping what the policy invalidates),
//      then migrate the faulted pages plus what the policy adds, and map.
//   4. Replay: wake stalled accessors (per block, per batch or once).
//   5. Between batches, issue the policy's pre-evictions and prefetches;
//      faults always come first, on the link and in the engine.
//
// The engine is single-threaded: a backend calls it from its event loop
// (sim) or from one service thread (uffd, cuda).
#ifndef UMLAB_CORE_ENGINE_H_
#define UMLAB_CORE_ENGINE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "core/backend.h"
#include "core/device_config.h"
#include "core/engine_observer.h"
#include "core/event.h"
#include "core/event_sink.h"
#include "core/memory_state.h"
#include "core/policy.h"
#include "core/role_residency.h"
#include "core/run_stats.h"

namespace umlab {

// Where the device's memory is at one instant, in bytes, split so the parts
// add up to what the frames hold: pages arriving, pages the allocator has
// freed (dead weight), prefetched pages not touched yet, and the rest.
struct ResidencyBreakdown {
  uint64_t resident_bytes = 0;           // resident, live, and used (or not prefetched)
  uint64_t in_flight_bytes = 0;          // on their way to the device
  uint64_t prefetched_unused_bytes = 0;  // resident by a prefetch, not accessed yet
  uint64_t inactive_bytes = 0;           // resident, but the allocator holds them free
};

struct EngineConfig {
  // UVM's uvm_perf_fault_batch_count.
  int batch_size = 256;
  // UVM's default replay policy is BATCH_FLUSH.
  ReplayPolicy replay = ReplayPolicy::kBatch;
  // Time from fetching a batch to the first migration: the fault-handling
  // latency (G10 Table 2 uses 45 us per far fault; faults of one batch are
  // handled together). The engine uses zero on a backend that charges
  // faults per kernel (Backend::ChargesFaultsPerKernel).
  Nanos fault_latency_ns = 45000;
  // Prefetch migrations in flight at once. Bounds how far prefetching can run
  // ahead of the fault path and keeps frames from being claimed too early.
  int prefetch_inflight_limit = 4;
  // The tiers behind the device (DeviceConfig): whether storage takes what
  // crosses the host's line for written-back data, and that line in pages.
  uint64_t host_capacity_pages = 0;
  bool has_storage = false;
  // Check the invariants after every engine step (tests turn this on).
  bool check_invariants = false;
};

// The engine's settings that come from the device: its fault batch and
// latency, and the tiers behind it. The rest stay at their defaults.
EngineConfig EngineConfigFor(const DeviceConfig& device);

class Engine final : public TransferListener, private PolicyContext {
 public:
  Engine(Backend& backend, Policy& policy, uint64_t capacity_frames,
         const EngineConfig& config);

  // Every program event the backend executes passes through here, in order:
  // allocator events, kernel begin/end and iteration markers.
  void OnProgramEvent(const Event& event);

  // Faults are waiting: service a batch unless one is being serviced.
  void ServiceFaults();
  bool servicing() const { return servicing_; }

  void OnTransferComplete(TransferId id) override;

  // The device evicted `block` by itself: the real UVM driver, out of memory
  // under a balloon, chose it with its own policy. The engine's residency
  // follows and the policy hears of it; nothing moves. A block with a
  // transfer in flight, or without a frame, is the engine's own eviction
  // being reported back and is left alone.
  void OnDeviceEvicted(BlockNumber block);
  // The same, for a device that says which pages it evicted and may report
  // them late (the sim's driver model): pages the engine no longer holds
  // are ignored, and a block with a transfer on its way keeps its frame.
  void OnDevicePagesEvicted(BlockNumber block, const PageMask& pages);
  // The same for pages the device dropped without write-back (another
  // engine's discard, on a device two engines share): their data is gone.
  void OnDevicePagesDiscarded(BlockNumber block, const PageMask& pages);
  // The device brought `pages` in by a transfer this engine did not make
  // (another engine's, on a device two engines share): they are resident,
  // with their data.
  void OnDevicePagesArrived(BlockNumber block, const PageMask& pages);

  // --- Host kernels (KernelPlace::kHost) ---
  // A host kernel reaches managed memory as the CPU does under UVM: the
  // pages it touches leave the device before it runs (written back where
  // the device dirtied them, after any migration of them has landed), and
  // they stay in host memory, out of every prefetch's reach, until it ends.
  // The backend claims each of the kernel's accesses just before it passes
  // the kernel's begin (so a prefetch the policy asks for at the begin finds
  // the pages held), runs it once HostClaimsSettled(), and releases the
  // claims at its end. Pages in
  // a storage tier are out of the CPU's reach here: claiming one is an
  // error (health()).
  void ClaimForHost(uint64_t address, uint64_t size, bool write);
  bool HostClaimsSettled() const { return host_unsettled_.empty(); }
  // The host kernel is over: pages it wrote hold data in host memory now.
  void ReleaseHostClaims();

  // --- Hidden copies (CopyMode::kHidden, docs/hum.md) ---
  // A hidden copy into [address, address+size) starts. Its destination's
  // pages leave the device as a host write takes them (what is on its way
  // lands first, resident pages go back to the host, written back where
  // the device dirtied them), and from now on they await the copy: no fault
  // on them is served with a migration (the batch waits until the copy
  // lands them, where a migration would bring a blank page), and no
  // prefetch, populate, remote mapping or fault expansion brings them. A
  // page may await one copy at a time: the backend holds back a copy whose
  // destination overlaps one under way (health() otherwise).
  void AwaitCopy(uint64_t address, uint64_t size);
  // Every page of [address, address+size) that awaits a copy has left the
  // device since (HUM's third condition for launching a kernel early).
  bool CopyDestinationOffDevice(uint64_t address, uint64_t size) const;
  // The pages of `block` awaiting a copy.
  PageMask AwaitingCopy(BlockNumber block) const;
  // The copy has staged `staged` pages of `block` in host memory: those
  // still awaiting it migrate now (prefetch traffic, counted in
  // hidden_copy_bytes too) and stop awaiting; faults on them wait for this
  // transfer. Returns its id; 0 when none awaits any more (the program
  // freed them); nullopt when no frame can be had (try again later).
  std::optional<TransferId> LandCopy(BlockNumber block, const PageMask& staged);

  // The host wrote [address, address+size) itself, outside the engine's
  // moves (a DMA copy into a host buffer, or into pages of a device buffer
  // that are in host memory): pages there that held no data hold it now,
  // in host memory, and their next migration copies them.
  void NoteHostWrote(uint64_t address, uint64_t size);

  // The policy, for the decisions the engine does not take itself: how the
  // backend runs a program's copies (Policy::HowToCopy and what follows).
  Policy& policy() { return policy_; }

  // No transfer of the engine's is still running.
  bool Quiescent() const { return inflight_.empty(); }

  // End of run: counts prefetched pages still resident and closes the last
  // iteration at `now`.
  void Finish();

  const RunStats& stats() const { return stats_; }
  RunStats& mutable_stats() { return stats_; }
  const MemoryState& memory_state() const { return memory_; }
  uint64_t capacity_frames() const { return memory_.capacity_frames(); }
  const EngineConfig& config() const { return config_; }

  // Not OK once the engine has seen it cannot make progress: faults that no
  // frame can be found for, with nothing in flight that could change that.
  const absl::Status& health() const { return health_; }

  // The first invariant violation seen (checks run when configured).
  const absl::Status& invariant_status() const { return invariant_status_; }
  // Checks the invariants now.
  absl::Status CheckInvariants() const;

  // Observed migrations, evictions and invalidations go here (may be null).
  void set_recorder(EventSink* recorder) { recorder_ = recorder; }

  // Observers hear of every step (core/engine_observer.h); they must
  // outlive the run.
  // From the first one on, the engine also keeps page totals for Residency().
  void AddObserver(EngineObserver* observer);

  // The device's memory now, by kind of page (only while an observer is
  // added). Asks the backend which prefetched pages were touched, for the
  // blocks whose prefetched pages were not all touched at the last call:
  // for sampling, not for every step.
  ResidencyBreakdown Residency() const;
  // Prefetch requests the policy queued that the engine has not issued.
  size_t pending_prefetches() const { return prefetch_queue_.size(); }
  // The pages of `block` that such requests ask for (a superset while
  // several requests for the block wait): a backend that models G10's
  // faults counts them as in transfer, not faulted, as G10 marks a page
  // in transfer from the moment its prefetch is queued.
  PageMask QueuedPrefetchPages(BlockNumber block) const {
    auto it = queued_prefetch_pages_.find(block);
    return it == queued_prefetch_pages_.end() ? PageMask() : it->second.pages;
  }

 private:
  struct PrefetchRequest {
    BlockNumber block;
    PageMask pages;
    uint32_t exec_id;
  };

  // PolicyContext.
  const MemoryView& memory() const override { return memory_; }
  Nanos now() const override { return backend_.Now(); }
  uint32_t current_exec_id() const override { return current_exec_id_; }
  void Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) override;
  void Populate(BlockNumber block, const PageMask& pages) override;
  void CancelPrefetches() override;
  size_t queued_prefetches() const override { return prefetch_queue_.size(); }
  void PreEvict(BlockNumber block) override;
  void PreEvictPages(BlockNumber block, const PageMask& pages, MemoryTier tier) override;
  void Discard(BlockNumber block, const PageMask& pages) override;
  void SetPinned(BlockNumber block, bool pinned) override;
  void MapRemote(BlockNumber block, const PageMask& pages) override;
  void UnmapRemote(BlockNumber block, const PageMask& pages) override;

  // Moves each unsettled host claim on as far as it can go now: evicts
  // claimed pages that are resident in a block with nothing in flight, and
  // settles a claim once none of its pages is on the device or on its way.
  void SettleHostClaims();
  // The same for the destinations of hidden copies.
  void SettleCopies();
  // Takes `pages` of `block` off the device as far as it can now: once no
  // transfer of the block is in flight, its resident ones among them are
  // evicted to the host (written back where dirty, counted as
  // host_writeback_bytes). True once none is on the device or on its way.
  bool MoveOffDevice(BlockState& block, const PageMask& pages);
  // The program freed `pages` of `block`: no copy lands them any more.
  void ForgetCopyInto(BlockNumber block, const PageMask& pages);
  // The batch in service still waits: for transfers, or for copies to land
  // pages it faulted on.
  bool BatchWaiting() const { return !batch_outstanding_.empty() || !batch_awaits_copy_.empty(); }
  // The pages of `block` a host kernel holds (none when no claim).
  PageMask HostHeld(BlockNumber block) const {
    auto it = host_claims_.find(block);
    return it == host_claims_.end() ? PageMask() : it->second.pages;
  }
  // Takes down the remote mappings of those `pages` that have one (a
  // migration, a free or a discard of them).
  void DropRemote(BlockState& block, const PageMask& pages);
  void ServiceBatch(size_t count);
  void ServiceBlock(const FaultedBlock& faulted);
  void FinishBatch();
  // Gives `block` a frame, evicting if needed. Returns the eviction the
  // migration must wait for (0: none), or nullopt if no frame can be had.
  std::optional<TransferId> ObtainFrame(BlockState& block, VictimReason reason);
  TransferId EvictBlock(BlockState& victim);
  // Evicts `pages` (resident ones) of `victim` to `tier`, or where the
  // policy's EvictTo says when none is given. The block gives its frame
  // back when no page is left.
  TransferId EvictPages(BlockState& victim, PageMask pages, std::optional<MemoryTier> tier);
  // Drops resident `pages` without a write-back.
  void DropResident(BlockState& block, const PageMask& pages);
  // What every eviction does to the engine's books, whoever chose it: counts
  // it, forgets the block's pages (`use` says which were accessed) and
  // frees its frame.
  void ReleaseResidency(BlockState& block, const PageUse& use);
  // The part of it that concerns pages: counts the eviction and forgets
  // `pages` (`use` says which were accessed); the frame stays.
  void ReleasePages(BlockState& block, PageMask pages, const PageUse& use);
  // `limited`: a prefetch that counts toward prefetch_inflight_limit (a
  // populate does not: it moves no bytes).
  TransferId IssueMigration(BlockState& block, const PageMask& pages,
                            const PageMask& prefetched, TransferKind kind,
                            TransferId after, bool limited = true);
  void PumpPrefetches();
  // Issues a queued prefetch, or with `populate` a populate (only its pages
  // with no data), for its pages neither resident nor on their way; counts
  // it dropped when no frame can be had.
  void IssueAhead(const PrefetchRequest& request, bool populate);
  void ApplyAllocatorEvent(const Event& event);
  void BeginIteration(uint64_t index);
  void CloseIteration();
  void NoteFreeSpace();
  // Keeps the peaks of the host's and storage's written-back data.
  void NoteTierPeaks();
  void Record(EventKind kind, BlockNumber block, uint64_t bytes, uint8_t cause);
  void MaybeCheckInvariants();
  // Tells every observer; fn(observer).
  template <typename Fn>
  void Notify(Fn fn) {
    for (EngineObserver* observer : observers_) fn(*observer);
  }
  // The end of an engine step: observers may sample, invariants are checked.
  void EndStep();

  // Pages over all blocks, in pages, kept while observers are added.
  struct PageTotals {
    uint64_t resident = 0;
    uint64_t in_flight = 0;
    uint64_t inactive_resident = 0;
    PageTotals& operator+=(const PageTotals& o) {
      resident += o.resident;
      in_flight += o.in_flight;
      inactive_resident += o.inactive_resident;
      return *this;
    }
    PageTotals& operator-=(const PageTotals& o) {
      resident -= o.resident;
      in_flight -= o.in_flight;
      inactive_resident -= o.inactive_resident;
      return *this;
    }
  };
  static PageTotals CountPages(const BlockState& block);
  // Runs fn(), which changes `block`'s resident, in-flight or inactive
  // pages, and keeps the totals right.
  template <typename Fn>
  void ChangePages(BlockState& block, Fn fn) {
    const PageMask on_device = block.resident | block.in_flight;
    if (!tracking_pages_) {
      fn();
    } else {
      page_totals_ -= CountPages(block);
      fn();
      page_totals_ += CountPages(block);
    }
    roles_.Change(block.number, on_device, block.resident | block.in_flight);
  }

  Backend& backend_;
  Policy& policy_;
  EngineConfig config_;
  bool unlimited_;
  MemoryState memory_;
  RunStats stats_;
  EventSink* recorder_ = nullptr;
  std::vector<EngineObserver*> observers_;
  bool tracking_pages_ = false;
  PageTotals page_totals_;
  // Device pages (resident or arriving) by tensor role, always kept.
  RoleResidency roles_;
  // Blocks that may hold prefetched pages not yet accessed; Residency()
  // drops the ones that hold none (a cache, hence mutable).
  mutable absl::flat_hash_set<BlockNumber> unconfirmed_prefetches_;

  // A transfer in flight, and which of its pages were brought ahead of need.
  struct InFlight {
    Transfer transfer;
    PageMask prefetched;
    bool limited = false;  // counted in prefetches_in_flight_
  };

  TransferId next_transfer_id_ = 1;
  absl::flat_hash_map<TransferId, InFlight> inflight_;

  // The batch in service.
  bool servicing_ = false;
  bool replay_owed_ = false;
  Nanos batch_start_ns_ = 0;
  absl::flat_hash_set<TransferId> batch_outstanding_;
  std::vector<FaultEntry> raw_batch_;
  std::vector<FaultEntry> sorted_batch_;
  std::vector<FaultedBlock> faulted_blocks_;

  std::deque<PrefetchRequest> prefetch_queue_;
  // What prefetch_queue_ asks for, per block, until its last request for
  // the block leaves the queue.
  struct QueuedPages {
    PageMask pages;
    int requests = 0;
  };
  absl::flat_hash_map<BlockNumber, QueuedPages> queued_prefetch_pages_;
  std::deque<PrefetchRequest> populate_queue_;
  struct PreEvictRequest {
    BlockNumber block;
    PageMask pages;                   // all: the whole block
    std::optional<MemoryTier> tier;   // none: the policy's EvictTo
  };
  std::deque<PreEvictRequest> pre_evict_queue_;
  int prefetches_in_flight_ = 0;

  // The running host kernel's claims, per block: the pages it touches and
  // of them those it writes; and the blocks whose claims are not settled.
  struct HostClaim {
    PageMask pages;
    PageMask written;
  };
  absl::flat_hash_map<BlockNumber, HostClaim> host_claims_;
  absl::flat_hash_set<BlockNumber> host_unsettled_;

  // Pages awaiting a hidden copy, per block; the blocks where some of them
  // are still on the device or on their way there (ordered: settling them
  // evicts, and evictions must come in the same order every run); and, of
  // the batch in service, the faulted pages that wait for a copy to land.
  absl::flat_hash_map<BlockNumber, PageMask> awaiting_copy_;
  std::set<BlockNumber> copy_unsettled_;
  absl::flat_hash_map<BlockNumber, PageMask> batch_awaits_copy_;

  uint32_t current_exec_id_ = 0;
  bool in_iteration_ = false;
  IterationStats iteration_start_;  // counters when the iteration began
  Nanos iteration_start_ns_ = 0;
  uint64_t last_free_frames_ = UINT64_MAX;

  absl::Status invariant_status_;
  absl::Status health_;
  bool batch_lacked_frames_ = false;
  bool batch_issued_ = false;
  int fruitless_batches_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_ENGINE_H_
