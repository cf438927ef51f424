// The uffd backend: runs a workload program on the userfaultfd device, with
// real threads, real page faults and real data.
//
// Threads (all started by Run, all joined before it returns):
//   - the caller's thread runs the program: allocator events, kernel
//     begin/end and iteration markers go to the engine in order; each kernel
//     is handed to the SM threads and waited for;
//   - `sms` SM threads take the kernel's page accesses from a shared cursor,
//     in program order, and really read (and check) or write each page; an
//     access to an unmapped page faults in the kernel and sleeps there;
//   - the device's reader thread turns each fault into a fault-buffer entry
//     (duplicates kept; a full buffer drops the entry and the thread is
//     woken by the next replay, faults again and so re-enters the buffer);
//     a first write to a write-protected page sets the page's dirty bit and
//     lets the write go on, without involving the engine (a GPU's hardware
//     dirty bit);
//   - a service thread is the engine's fault-service loop: it delivers
//     transfer completions, asks the engine to service fault batches, and
//     carries out replays, which wake exactly the threads stalled on the
//     replayed pages. While a kernel runs it polls for up to 50 us before
//     it sleeps, and receives fault messages itself meanwhile (as the
//     reader would), so that a fault arriving then is serviced without a
//     thread wake-up: on a VM those cost several times the service itself.
//     It gathers a batch as the modelled device does (see BatchGathered);
//   - two transfer workers (UffdTransfers) move data through the throttle;
//     a worker whose transfer landed drives the engine itself (delivers the
//     completion, runs the replay it triggers) when the engine is free,
//     rather than waking the service thread for it.
// The engine is called only under one lock (mu_).
//
// Remote mappings (MapRemote): the host copy itself is mapped into the
// device range over the pages (UffdDevice::MapHostCopy), so an SM's touch
// reads and writes host memory, with no fault and no frame; the SM charges
// the bytes its program access touches to the throttle at the remote rate
// and waits for them, as the sim's SM does. Taking the mapping down puts
// device memory back (UnmapHostCopy). Both change the page table under SMs
// that may be touching those very pages, so each SM announces the page it
// is touching (SmState::touching), and a remote mapping changes only once
// no SM is touching its pages, save those asleep in a fault (see
// MapRemote and UnmapRemote in the .cc).
//
// Host kernels (KernelPlace::kHost) run on the run thread itself: the
// engine takes their pages off the device (Engine::ClaimForHost, writing
// back what the device dirtied), then the thread reads and writes those
// pages' host copies, every word checked and written as an SM's access is,
// for at least the kernel's dilated CPU time; no SM runs meanwhile.
//
// Copies (kCopy, docs/hum.md) run as the policy says (Policy::HowToCopy),
// in the order CopyStream decides, with real bytes (uffd_copies.cc): a host
// buffer is host memory, the host copies of its blocks' slots; a DMA copy
// is a copy-engine thread's, booked on the throttle at the copy rate; a host
// access is the run thread's own, as a host kernel's; a hidden copy is
// staged by the policy's CopyThreads() threads into the destination's host
// copies, 2 MB at a time, and each staged chunk lands as the engine's
// migration (Engine::LandCopy), one at a time. Until a copy to the device
// is done its source is write-protected for real (userfaultfd on the host
// copies): a host store there sleeps in the kernel until it is lifted.
//
// Modelled times (link, fault-handling latency, kernel compute) are
// stretched by `dilation`; `throttle=false` drops them all. The backend's
// clock (Now(), hence the engine's timestamps and the run's time_ns and
// stall_ns) is modelled time: wall time since the start / dilation, so that
// it reads in the same units as the sim's (wall time when throttle=false).
#ifndef UMLAB_BACKENDS_EMU_UFFD_BACKEND_H_
#define UMLAB_BACKENDS_EMU_UFFD_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backends/emu/copy_stream.h"
#include "backends/emu/uffd_transfers.h"
#include "backends/emu/uffd_verifier.h"
#include "core/access_span.h"
#include "core/backend.h"
#include "core/engine.h"
#include "core/kernel_assembler.h"
#include "emu/device_presets.h"
#include "emu/fault_buffer.h"
#include "backends/emu/pcie_throttle.h"
#include "backends/emu/uffd_device.h"

namespace umlab {

struct UffdOptions {
  double dilation = 4;       // wall time = modelled time x dilation
  bool throttle = true;      // false: no modelled delays at all
  bool verify = false;       // check every word read
  int sms = 8;               // SM threads
  double watchdog_s = 120;   // fail when nothing progresses this long
  uint64_t max_blocks = 32768;
  // Device frames are 2 MiB hugetlb pages (UffdDevice's huge frames): one
  // PMD per migration instead of 512 PTEs. Needs the capacity's worth of
  // free pages in vm.nr_hugepages and a policy that migrates, evicts and
  // invalidates whole blocks only; a partial one fails the run. Dirty bits
  // are per 2 MiB: a frame's first write marks all its pages dirty.
  bool huge_pages = false;
  // Empty: device memory is a memfd. Else a tmpfs directory for it; mounted
  // with huge=within_size, frames are 2 MiB folios with a 4 KiB page table
  // (UffdDevice::Options::directory): fast migrations into released frames
  // for every policy.
  std::string device_dir;
  // With a device that has a storage tier (ssd=true): where its file goes
  // (StorageFile). A disk-backed directory makes it real storage I/O.
  std::string storage_dir = "/var/tmp";
  // Tests only: kernels launch without waiting for the copies before them
  // (the ordering docs/hum.md's "blank page" race needs), so that a test can
  // show --verify catching a kernel that reads a copy's destination early.
  bool launch_ignoring_copies_for_testing = false;
};

// What the uffd backend counted beyond RunStats.
struct UffdCounters {
  uint64_t received_faults = 0;  // fault messages, including dropped ones
  uint64_t write_protect_faults = 0;  // first writes (dirty-bit traps)
  uint64_t late_dirty_pages = 0;  // written between QueryUse and unmap; written back
  // Mapped pages whose page-table entry the kernel had dropped on its own,
  // found by a fault and mapped again (RestoreLostMapping); 0 normally.
  uint64_t restored_mappings = 0;
  // Fault batches fetched before every SM due at the batch's instant had
  // arrived: the gathering window closed on a straggler (see BatchGathered).
  uint64_t ungathered_batches = 0;
  // Host stores that found a copy's source write-protected and slept until
  // the copy had landed (write-protect faults on the host copies).
  uint64_t protected_source_writes = 0;
  uint64_t pages_checked = 0;
  uint64_t corrupted_words = 0;
  uint64_t zeroed_pages_read = 0;  // data pages read back as zeroes (dropped)
  uint64_t slots = 0;
  bool huge_frames = false;  // which path ran: hugetlb frames, or 4 KiB pages
  // Device memory: frames whose slot holds page cache (now and at most),
  // and the memfd's allocated bytes (now, and at most as sampled whenever a
  // frame is released, when it is fullest).
  uint64_t frames_held = 0;
  uint64_t peak_frames_held = 0;
  uint64_t device_bytes = 0;
  uint64_t peak_device_bytes = 0;
};

class UffdBackend final : public Backend,
                          private UffdTransfers::Hooks,
                          private CopyStream::Mover {
 public:
  // Fails with a one-line, actionable message if userfaultfd is unavailable.
  static absl::StatusOr<std::unique_ptr<UffdBackend>> Create(const DeviceConfig& device,
                                                             uint64_t capacity_frames,
                                                             const UffdOptions& options);
  ~UffdBackend() override;

  // Backend.
  std::string name() const override { return "uffd"; }
  absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) override;
  absl::Status CheckConsistency(const Engine& engine) const override;
  void SetListener(TransferListener* listener) override { listener_ = listener; }
  size_t FetchFaults(absl::Span<FaultEntry> out) override;
  void Migrate(const Transfer& transfer) override;
  void Evict(const Transfer& transfer) override;
  void Invalidate(BlockNumber block, const PageMask& pages) override;
  PageUse QueryUse(BlockNumber block) const override;
  void Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) override;
  // Not with huge frames: their hugetlb mapping splits at 2 MiB only, and
  // the engine maps pages one by one (a fault answered by a mapping).
  bool MapsRemotely() const override { return !options_.huge_pages; }
  void MapRemote(BlockNumber block, const PageMask& pages, const PageMask& fresh) override;
  void UnmapRemote(BlockNumber block, const PageMask& pages) override;
  // Modelled time since the run started (see the top of this file).
  Nanos Now() const override { return throttle_.Modelled(MonotonicNanos() - start_ns_); }
  // The fetched batch's instant (BatchGathered), at most Now().
  Nanos FetchedBatchInstant() const override;

  UffdCounters counters() const;
  // Fault entry (the reader's receipt) to the replay that woke it, per
  // replayed page, in wall-clock ns; at most the first 2^20.
  std::vector<Nanos> service_latencies() const;
  // Page accesses done plus transfers landed so far (tests use it to know a
  // run is under way).
  uint64_t progress() const { return progress_.load(); }

 private:
  struct SlotBits;
  struct KernelRange : AccessSpan {
    uint64_t start = 0;  // index of its first access in the kernel
    bool write = false;
    std::vector<uint64_t> slots;  // per block spanned, from the first
  };
  struct alignas(64) SmState {
    uint64_t accesses = 0;
    Nanos stall_ns = 0;
    std::atomic<int> tid{0};
    // The modelled instant of the SM's current (or, while it paces, next)
    // access, as a MonotonicNanos deadline; kNever once its share of the
    // kernel is done. Written by the SM, read by the service's gather.
    std::atomic<Nanos> due{kNever};
    // The device page its current access faulted on while it sleeps in the
    // kernel (kNotStalled otherwise): set by the fault's receipt, cleared
    // by the replay that wakes it, both under inbox_mu_.
    static constexpr uint64_t kNotStalled = UINT64_MAX;
    std::atomic<uint64_t> stalled_on{kNotStalled};
    // The device page the SM is in an access to (kNotTouching otherwise),
    // from before it looks at the page's bits until after it has looked
    // again once the access is done: what a change of a remote mapping
    // waits for (see the .cc).
    static constexpr uint64_t kNotTouching = UINT64_MAX;
    std::atomic<uint64_t> touching{kNotTouching};
    // Bytes read and written through remote mappings.
    uint64_t remote_read_bytes = 0;
    uint64_t remote_write_bytes = 0;
  };
  // What one access did.
  struct AccessOutcome {
    bool waited = false;  // the page was neither mapped nor remote: it faulted
    bool remote = false;  // it went through a remote mapping, to the host copy
  };
  struct TimedReplay {
    Nanos due;  // MonotonicNanos
    ReplayPolicy policy;
    BlockNumber block;
  };

  UffdBackend(const DeviceConfig& device, uint64_t capacity_frames, const UffdOptions& options);

  absl::Status StartThreads();
  absl::Status Execute(EventSource& program);
  // ranges_, total_accesses_ and the slots of their blocks for a kernel's
  // `accesses`.
  absl::Status LayOutAccesses(absl::Span<const Event> accesses);
  // fn(device page) for every page the kernel laid out writes.
  void ForEachWrittenPage(absl::FunctionRef<void(uint64_t device_page)> fn) const;
  absl::Status ExecuteKernel(const Event& begin);
  // A host kernel, laid out: its pages leave the device, then this thread
  // touches their host copies (see the top of this file).
  absl::Status ExecuteHostKernel(const KernelAssembler& kernel);
  // Zeroes the host copies of the laid-out pages that hold no data yet, as
  // a first touch in host memory finds them (the engine says which).
  void PopulateHostCopies() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The run thread reads or writes the host copy of every laid-out page.
  absl::Status TouchHostCopies();
  // Lets time pass until `end` (MonotonicNanos), stopping if the run aborts:
  // a kernel's compute beyond its accesses. Computing is not a hang, so the
  // watchdog does not count this time.
  absl::Status ComputeUntil(Nanos end);
  absl::Status Teardown();
  // The watchdog's view: progress is page accesses completed plus
  // transfers landed, never faults received (an accessor that faults on
  // the same page forever must not look like progress).
  struct Watch {
    uint64_t progress = 0;
    uint64_t faults = 0;  // received_ when progress last moved
    Nanos since = 0;      // MonotonicNanos
  };
  Watch StartWatch();
  // Stops waiting: an error elsewhere, SIGINT, the engine's deadlock check,
  // or the watchdog. Called by the run thread while it waits.
  absl::Status CheckAbort(Watch& watch);
  // The watchdog's one-line error, naming the first stalled pages.
  absl::Status WatchdogError(const Watch& watch);
  absl::Status WatchdogErrorLocked(const Watch& watch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls the engine, under mu_, until `done` says so or the run aborts
  // (CheckAbort).
  absl::Status AwaitEngine(absl::FunctionRef<bool(const Engine&)> done);
  // After a host kernel's or a host-access copy's claims: waits for them to
  // settle, charges the wait, and runs `then` under the lock.
  absl::Status SettleHostClaims(bool settled, Nanos claimed_at, absl::FunctionRef<void()> then);
  void RecordProgram(const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Copies (uffd_copies.cc).
  absl::Status RunCopy(const Event& event);
  // A copy the policy runs as the host's own access: the run thread moves
  // the bytes once the engine has taken both buffers off the device.
  absl::Status CopyAsHostAccess(const CopyCommand& copy);
  // Waits until the copies let kernel `begin` launch (CopyStream::MayLaunch).
  absl::Status AwaitLaunch(const Event& begin, absl::Span<const Event> accesses);
  // Waits, counting copy_wait_ns, until `done` (called under mu_) says so.
  absl::Status AwaitCopies(absl::FunctionRef<bool()> done);
  // A host access of these ranges waits for the DMA copies that use them.
  absl::Status AwaitDmaOff(absl::Span<const Event> accesses);
  // CopyStream::Mover.
  void Issued(CopyId id, const CopyCommand& copy) override;
  TransferId StartDma(CopyId id, const CopyCommand& copy) override;
  void Stage(CopyId id, size_t chunk, uint64_t destination, uint64_t source, uint64_t bytes,
             Nanos modelled) override;
  void Done(CopyId id, const CopyCommand& copy) override;
  struct CopyJob {
    CopyId copy = 0;
    size_t chunk = 0;     // staging
    TransferId dma = 0;   // a DMA copy: its id in the stream
    CopyCommand command;  // a DMA copy
    uint64_t destination = 0, source = 0, bytes = 0;  // staging
    Nanos modelled = 0;  // staging: its modelled time
  };
  // A helper thread with every signal blocked (SIGINT reaches the run thread).
  static std::thread StartQuietHelper(std::function<void()> fn);
  void CopyThreadLoop(bool dma);
  void StageChunk(const CopyJob& job);
  void RunDma(const CopyJob& job);
  // Moves one block's part of a DMA copy between the device buffer's pages
  // (device memory or host copies, by where each page is) and the host buffer.
  void DmaBlockPart(const CopyCommand& copy, uint64_t first, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sleeps until `deadline` (MonotonicNanos) or the run aborts.
  void PaceUntil(Nanos deadline);
  // Starts the staging threads (the policy's CopyThreads()) or the DMA
  // thread, if they have not started yet.
  void StartCopyThreads(bool dma) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Zeroes the host copies of the first and last page of [address,
  // address+size) where a copy covers them in part and they hold no data
  // yet: the bytes beside the copy's must read as zeroes, as populated.
  void ZeroFreshEdges(uint64_t address, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where program address `address` has its host copy: an offset in the
  // host copies, and a pointer (its slot must exist).
  uint64_t HostOffset(uint64_t address) const;
  char* HostByte(uint64_t address) const;
  // The device page index (slot * 512 + page) of a program address.
  uint64_t DevicePageOf(uint64_t address) const;
  // Copies `bytes` from host copies at `from` to host copies at `to`
  // (program addresses), block by block.
  void CopyHostBytes(uint64_t to, uint64_t from, uint64_t bytes) const;
  // Sets or lifts write protection of the host copies of every page of
  // [address, address+size).
  void ProtectHostRange(uint64_t address, uint64_t size, bool protect);
  void LiftAllProtections();

  // Slots.
  absl::Status EnsureSlots(BlockNumber first, BlockNumber end);
  bool FindSlot(BlockNumber block, uint64_t& slot) const;
  // The block's slot, given out now if it has none (a policy moves a block
  // the program has not declared yet); false when that failed the run.
  bool SlotOrFail(BlockNumber block, uint64_t& slot);
  template <typename Fn>
  void ForWholePages(uint64_t address, uint64_t size, Fn fn);

  // Threads.
  void SmLoop(int index);
  void RunShare(int index);
  AccessOutcome Access(SmState& sm, uint64_t slot, PageNumber page, bool write);
  // The SM's access at modelled instant `instant` (MonotonicNanos) went to
  // the host copy: books its `bytes` on the throttle at the remote rate.
  // Returns when the SM has them, round trip included.
  Nanos AccessRemotely(SmState& sm, uint64_t bytes, bool write, Nanos instant);
  // Marks the SM as touching `device_page`, after any change of its slot's
  // remote mappings is over.
  void EnterPage(SmState& sm, uint64_t slot, uint64_t device_page);
  // Waits until no SM touches `pages` of the slot, except, if
  // `asleep_in_fault`, SMs whose fault on the page they touch has been
  // received (they sleep in the kernel until a replay). Receives fault
  // messages meanwhile. Gives up once the run aborts.
  void AwaitAccessorsOf(uint64_t slot, const PageMask& pages, bool asleep_in_fault);
  void OnFault(const UffdFault& fault);
  // A miss on a page whose mapped bit is set: maps it again if the kernel
  // dropped its entry (see the .cc).
  void RestoreLostMapping(uint64_t slot, int index);
  void ServiceLoop();
  // The service's work under mu_: landed transfers to the engine, replays
  // that fell due, a gathered fault batch; then the engine's state to the
  // inbox, waking the service thread if `notify` (another thread drove).
  void DriveEngine(bool notify) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The service thread has something to do.
  bool ServiceReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  // Buffered faults may be fetched: the engine is idle and the batch is
  // gathered (BatchGathered) or its gathering window has closed.
  bool FaultsReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  bool GatherOver() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  // Every SM that faults at the batch's instant has done so (see the .cc).
  bool BatchGathered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  // The fault buffer was emptied: no batch is being gathered.
  void EndGather() ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  // An SM moves on to the access due at `next` (kNever: its share is done);
  // wakes the service if that takes it past the instant being gathered.
  void PublishDue(SmState& sm, Nanos next);
  // Returns once ServiceReady(); polls before it sleeps (see the .cc).
  void AwaitServiceWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_mu_);
  // Polls, without inbox_mu_, for up to `budget` ns until inbox_events_
  // moves on from `seen`, receiving fault messages meanwhile. Returns
  // whether it did (false: the budget ran out or the core was wanted).
  bool PollForWork(uint64_t seen, Nanos budget);
  // `instant` (MonotonicNanos): when the replay happens in the model, the
  // instant the SMs it wakes resume from.
  void ApplyReplay(ReplayPolicy policy, BlockNumber block, Nanos instant)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainRecords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const absl::Status& status);
  Nanos ReadyAt(Nanos not_before) const;

  // UffdTransfers::Hooks.
  void Copy(const Transfer& transfer) override;
  void Land(const Transfer& transfer) override;
  void Completed(TransferId id, Nanos landed_at) override;

  // Page-table bits.
  bool MappedOnDevice(uint64_t slot, int index) const;
  // A write reached the page's device memory outside an SM (a DMA copy).
  void MarkDirty(uint64_t slot, int index);
  PageMask Load(const std::atomic<uint64_t>* words) const;
  void UnmapLocked(uint64_t slot, const PageMask& pages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(map_mu_);
  // Huge frames: fails the run (and returns false) unless `pages` of the
  // block are the whole block, naming `what` the engine asked for.
  bool WholeBlockOrFail(uint64_t slot, const PageMask& pages, const char* what);
  // A migration's link time is over: map its pages.
  void MapLanded(const Transfer& transfer, uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(map_mu_);
  // Frees the slot's device memory if it holds some and nothing of it is
  // mapped or in flight (its block gave up its frame).
  void MaybeReleaseLocked(uint64_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(map_mu_);

  uint64_t capacity_frames_;
  UffdOptions options_;
  DeviceConfig device_config_;
  std::unique_ptr<UffdDevice> device_;
  PcieThrottle throttle_;
  // What an SM waits beyond its remote bytes' time on the link (dilated
  // LinkConfig::remote_latency_ns).
  Nanos remote_latency_;
  UffdVerifier verifier_;
  std::unique_ptr<SlotBits[]> bits_;
  // Written by EnsureSlots, read by the reader thread in OnFault. A fault on
  // a slot comes after the slot was given out, but only through the kernel
  // (an SM touches the page, the reader reads the message), which is no
  // happens-before to C++: release/acquire makes it one.
  std::unique_ptr<std::atomic<BlockNumber>[]> block_of_slot_;
  std::unique_ptr<UffdTransfers> transfers_;
  TransferListener* listener_ = nullptr;
  Engine* engine_ = nullptr;
  EventSink* recorder_ = nullptr;
  Nanos start_ns_ = 0;
  bool ran_ = false;

  // Slots by program block; written by the run thread between kernels.
  mutable absl::Mutex slots_mu_;
  absl::flat_hash_map<BlockNumber, uint64_t> slot_of_ ABSL_GUARDED_BY(slots_mu_);

  // The engine and everything it calls back into.
  absl::Mutex mu_;
  std::vector<TimedReplay> timed_replays_ ABSL_GUARDED_BY(mu_);
  // While the service delivers a landed transfer to the engine: when its
  // link time ended (MonotonicNanos), the earliest a replay it triggers
  // can happen in the model; 0 otherwise.
  Nanos delivering_landed_at_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::flat_hash_map<BlockNumber, PageMask> queried_dirty_;  // under mu_

  // The slot whose remote mappings are being changed (kNoSlot: none): SMs
  // wait before touching any of its pages. Written under mu_ only.
  static constexpr uint64_t kNoSlot = UINT64_MAX;
  std::atomic<uint64_t> remapping_slot_{kNoSlot};

  // Device page-table changes, and the dirty bits they race with.
  mutable absl::Mutex map_mu_;
  uint64_t mapped_frames_ ABSL_GUARDED_BY(map_mu_) = 0;
  uint64_t frames_held_ ABSL_GUARDED_BY(map_mu_) = 0;  // slots holding device memory
  uint64_t peak_frames_held_ ABSL_GUARDED_BY(map_mu_) = 0;
  uint64_t peak_device_bytes_ ABSL_GUARDED_BY(map_mu_) = 0;

  // What the reader, the workers and the service loop exchange.
  mutable absl::Mutex inbox_mu_;
  absl::CondVar inbox_cv_;
  FaultBuffer fault_buffer_ ABSL_GUARDED_BY(inbox_mu_);
  // Device page -> when its first fault was received (MonotonicNanos).
  absl::flat_hash_map<uint64_t, Nanos> stalled_ ABSL_GUARDED_BY(inbox_mu_);
  std::vector<Event> pending_records_ ABSL_GUARDED_BY(inbox_mu_);
  // Landed transfers and when their link time ended (MonotonicNanos).
  std::vector<std::pair<TransferId, Nanos>> completed_ ABSL_GUARDED_BY(inbox_mu_);
  std::vector<Nanos> latencies_ ABSL_GUARDED_BY(inbox_mu_);
  uint64_t received_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  uint64_t ungathered_batches_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  bool engine_busy_ ABSL_GUARDED_BY(inbox_mu_) = false;
  // The batch being gathered: the modelled instant of its earliest fault
  // (an SM's `due`; kNever when the buffer is empty) and the wall time at
  // which gathering gives up (the first fault's receipt + one dilated
  // fault-handling latency). The instant is written under inbox_mu_ and
  // read by the SMs without it.
  std::atomic<Nanos> gather_instant_{kNever};
  Nanos gather_deadline_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  // The instant of the batch last fetched (MonotonicNanos).
  Nanos fetched_instant_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  Nanos gather_window_ = 0;  // dilated fault latency; 0 (throttle off): no gathering
  // When the latest replay woke its accessors (MonotonicNanos): the instant
  // a woken SM resumes from, as on the sim all woken SMs resume at once.
  std::atomic<Nanos> last_wake_{0};
  Nanos next_replay_due_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  bool stop_service_ ABSL_GUARDED_BY(inbox_mu_) = false;
  // Bumped (under inbox_mu_) by everything that may give the service thread
  // work, so that it can poll for work without taking the lock.
  std::atomic<uint64_t> inbox_events_{0};
  // SM threads are running a kernel: faults may come at any moment, so the
  // service thread polls for a while before it sleeps.
  std::atomic<bool> kernel_active_{false};

  // Kernel dispatch.
  absl::Mutex kernel_mu_;
  absl::CondVar kernel_cv_;  // SMs wait here for a kernel
  absl::CondVar done_cv_;    // the run thread waits here for the SMs
  uint64_t generation_ ABSL_GUARDED_BY(kernel_mu_) = 0;
  int running_ ABSL_GUARDED_BY(kernel_mu_) = 0;
  int registered_ ABSL_GUARDED_BY(kernel_mu_) = 0;
  bool stop_sms_ ABSL_GUARDED_BY(kernel_mu_) = false;
  std::vector<KernelRange> ranges_;  // read-only while a kernel runs
  uint64_t total_accesses_ = 0;
  double per_access_ns_ = 0;
  Nanos kernel_start_ = 0;  // MonotonicNanos at dispatch: every SM's first access is due then
  std::atomic<uint64_t> cursor_{0};
  std::atomic<uint32_t> exec_id_{0};
  uint32_t kernel_seq_ = 0;

  // Copies: the stream's decisions (under mu_), the staging threads and
  // the DMA thread with their queues, the sources write-protected now.
  CopyStream copies_;
  absl::Mutex copy_jobs_mu_;
  absl::CondVar copy_jobs_cv_;
  std::deque<CopyJob> stage_jobs_ ABSL_GUARDED_BY(copy_jobs_mu_);
  std::deque<CopyJob> dma_jobs_ ABSL_GUARDED_BY(copy_jobs_mu_);
  bool stop_copies_ ABSL_GUARDED_BY(copy_jobs_mu_) = false;
  std::vector<std::thread> copy_threads_;  // started by the first copy that needs them (mu_)
  bool dma_thread_started_ = false;        // under mu_
  size_t stage_threads_ = 0;               // under mu_
  TransferId next_dma_ = TransferId{1} << 61;  // under mu_
  absl::Mutex protect_mu_;
  absl::flat_hash_map<CopyId, CopyCommand> protected_ ABSL_GUARDED_BY(protect_mu_);
  bool protections_lifted_ ABSL_GUARDED_BY(protect_mu_) = false;
  std::atomic<uint64_t> protected_writes_{0};

  std::unique_ptr<SmState[]> sms_;
  std::vector<std::thread> sm_threads_;
  std::thread service_;
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> progress_{0};
  std::atomic<uint64_t> wp_faults_{0};
  std::atomic<uint64_t> late_dirty_{0};
  std::atomic<uint64_t> restored_{0};
  mutable absl::Mutex error_mu_;
  absl::Status error_ ABSL_GUARDED_BY(error_mu_);
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_BACKEND_H_
