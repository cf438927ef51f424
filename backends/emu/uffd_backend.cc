#include "backends/emu/uffd_backend.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/access_pace.h"
#include "core/backend_registry.h"
#include "core/block_range.h"
#include "core/kernel_assembler.h"
#include "core/page_mask.h"
#include "core/sigint_guard.h"
#include "backends/emu/uffd_spin.h"

namespace umlab {
namespace {

constexpr size_t kMaxLatencySamples = 1 << 20;
// How often the run thread looks up from waiting (SIGINT, errors, watchdog).
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
// How long the service thread polls for work before it sleeps, while a
// kernel runs. Covers the time from a replay to the woken SM's next fault
// (12-20 us median, about 30 us p90 on the 2-core CI VM), so that a thread
// faulting page after page is serviced without a sleep in between; bounded
// so that a kernel that stops faulting costs at most this much CPU per idle
// period (and less when another thread wants the core: backends/emu/uffd_spin.h).
constexpr Nanos kServiceSpinNanos = 50000;
// How often that polling reads the userfaultfd itself (a read() that finds
// nothing costs about 0.5 us).
constexpr Nanos kReceiveEveryNanos = 2000;
// An SM that falls this far behind its compute pacing (it stalled) starts
// pacing afresh instead of rushing to catch up.
constexpr Nanos kPacingCatchUpNanos = 200000;

// Helper threads start with every signal blocked, so SIGINT reaches the
// run thread and no worker's system call is interrupted.
template <typename Fn>
std::thread StartQuietThread(Fn fn) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  std::thread thread(std::move(fn));
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return thread;
}

void SleepPacing(Nanos deadline) {
  timespec ts{static_cast<time_t>(deadline / 1000000000),
              static_cast<long>(deadline % 1000000000)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

}  // namespace

struct UffdBackend::SlotBits {
  std::atomic<uint64_t> mapped[kPageMaskWords];
  std::atomic<uint64_t> accessed[kPageMaskWords];
  std::atomic<uint64_t> dirty[kPageMaskWords];
  // Mapped remotely: the device range shows the host copy there. Changed
  // under map_mu_ (and mu_), read by the SMs without a lock.
  std::atomic<uint64_t> remote[kPageMaskWords];
  // Under map_mu_: the slot holds device memory (a frame's page cache), and
  // how many transfers of its block are submitted and not landed. The frame
  // is released once nothing is mapped and nothing is in flight.
  bool holds_memory = false;
  int in_flight = 0;
};

namespace {

bool TestBit(const std::atomic<uint64_t>* words, int index) {
  return (words[index / 64].load(std::memory_order_relaxed) >> (index % 64)) & 1;
}
void SetBit(std::atomic<uint64_t>* words, int index) {
  const uint64_t bit = uint64_t{1} << (index % 64);
  if ((words[index / 64].load(std::memory_order_relaxed) & bit) == 0) {
    words[index / 64].fetch_or(bit);
  }
}
void OrMask(std::atomic<uint64_t>* words, const PageMask& mask) {
  for (int w = 0; w < kPageMaskWords; ++w) {
    uint64_t bits = ((mask >> (w * 64)) & PageMask(~uint64_t{0})).to_ullong();
    if (bits != 0) words[w].fetch_or(bits);
  }
}
void ClearMask(std::atomic<uint64_t>* words, const PageMask& mask) {
  for (int w = 0; w < kPageMaskWords; ++w) {
    uint64_t bits = ((mask >> (w * 64)) & PageMask(~uint64_t{0})).to_ullong();
    if (bits != 0) words[w].fetch_and(~bits);
  }
}

}  // namespace

bool UffdBackend::MappedOnDevice(uint64_t slot, int index) const {
  return TestBit(bits_[slot].mapped, index);
}

void UffdBackend::MarkDirty(uint64_t slot, int index) {
  absl::MutexLock lock(&map_mu_);
  if (options_.huge_pages) {
    OrMask(bits_[slot].dirty, FullPageMask());
  } else {
    SetBit(bits_[slot].dirty, index);
  }
}

PageMask UffdBackend::Load(const std::atomic<uint64_t>* words) const {
  PageMask mask;
  for (int w = kPageMaskWords - 1; w >= 0; --w) {
    mask <<= 64;
    mask |= PageMask(words[w].load());
  }
  return mask;
}

// ---------------------------------------------------------------------------
// Construction and teardown.

UffdBackend::UffdBackend(const DeviceConfig& device, uint64_t capacity_frames,
                         const UffdOptions& options)
    : capacity_frames_(capacity_frames),
      options_(options),
      device_config_(device),
      throttle_(device.link, options.dilation, options.throttle),
      remote_latency_(throttle_.Dilate(device.link.remote_latency_ns)),
      verifier_(options.verify, options.max_blocks),
      fault_buffer_(static_cast<size_t>(device.fault_buffer_entries)),
      gather_window_(throttle_.Dilate(device.fault_latency_ns)),
      copies_(device_config_, static_cast<CopyStream::Mover&>(*this)) {}

absl::StatusOr<std::unique_ptr<UffdBackend>> UffdBackend::Create(const DeviceConfig& device,
                                                                 uint64_t capacity_frames,
                                                                 const UffdOptions& options) {
  std::unique_ptr<UffdBackend> backend(new UffdBackend(device, capacity_frames, options));
  UffdDevice::Options device_options;
  device_options.max_blocks = options.max_blocks;
  device_options.huge_pages = options.huge_pages;
  device_options.directory = options.device_dir;
  if (device.link.storage.present) device_options.storage_directory = options.storage_dir;
  // An unlimited capacity (capacity_frames beyond the range) is checked
  // frame by frame instead: CopyIn fails cleanly when the pool runs dry.
  if (options.huge_pages && capacity_frames < options.max_blocks &&
      UffdDevice::FreeHugePages() < capacity_frames) {
    // umlab never reserves them itself: the pool is the machine's memory,
    // taken from everyone else, and needs root.
    return absl::FailedPreconditionError(absl::StrFormat(
        "backend uffd: huge_pages=true needs %d free 2 MiB huge pages (the capacity) and %d "
        "are free: as root, sysctl vm.nr_hugepages=%d (more if others use them), or drop "
        "huge_pages",
        capacity_frames, UffdDevice::FreeHugePages(), capacity_frames));
  }
  absl::StatusOr<std::unique_ptr<UffdDevice>> created = UffdDevice::Create(device_options);
  if (!created.ok()) return created.status();
  backend->device_ = std::move(*created);
  backend->bits_.reset(new SlotBits[options.max_blocks]());
  backend->block_of_slot_.reset(new std::atomic<BlockNumber>[options.max_blocks]());
  backend->sms_.reset(new SmState[options.sms]);
  return backend;
}

UffdBackend::~UffdBackend() { (void)Teardown(); }

std::thread UffdBackend::StartQuietHelper(std::function<void()> fn) {
  return StartQuietThread(std::move(fn));
}

absl::Status UffdBackend::StartThreads() {
  transfers_ = std::make_unique<UffdTransfers>(throttle_, static_cast<Hooks&>(*this));
  for (int i = 0; i < options_.sms; ++i) {
    sm_threads_.push_back(StartQuietThread([this, i] { SmLoop(i); }));
  }
  {
    // The reader maps thread ids to SMs, so every SM must have said its id.
    absl::MutexLock lock(&kernel_mu_);
    while (registered_ < options_.sms) done_cv_.Wait(&kernel_mu_);
  }
  if (absl::Status s = device_->StartReader([this](const UffdFault& f) { OnFault(f); });
      !s.ok()) {
    return s;
  }
  service_ = StartQuietThread([this] { ServiceLoop(); });
  return absl::OkStatus();
}

absl::Status UffdBackend::Teardown() {
  abort_.store(true);
  // Nothing may touch the userfaultfd once it is released, so stop its
  // users first: the copy threads (which submit transfers), the workers,
  // the service loop, the reader.
  std::vector<std::thread> copy_threads;
  {
    // Under mu_, where a landing may start staging threads: none starts
    // from now on.
    absl::MutexLock engine_lock(&mu_);
    copy_threads.swap(copy_threads_);
    absl::MutexLock lock(&copy_jobs_mu_);
    stop_copies_ = true;
    copy_jobs_cv_.SignalAll();
  }
  for (std::thread& thread : copy_threads) {
    if (thread.joinable()) thread.join();
  }
  LiftAllProtections();
  if (transfers_ != nullptr) transfers_->Stop();
  {
    absl::MutexLock lock(&inbox_mu_);
    stop_service_ = true;
    inbox_events_.fetch_add(1, std::memory_order_release);
    inbox_cv_.Signal();
  }
  if (service_.joinable()) service_.join();
  if (device_ != nullptr) {
    device_->StopReader();
    // Wakes the SMs still stalled in a fault; their retry finds ordinary memory.
    device_->Release();
  }
  {
    absl::MutexLock lock(&kernel_mu_);
    stop_sms_ = true;
    kernel_cv_.SignalAll();
  }
  for (std::thread& thread : sm_threads_) {
    if (thread.joinable()) thread.join();
  }
  sm_threads_.clear();
  return absl::OkStatus();
}

void UffdBackend::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&error_mu_);
    if (error_.ok()) error_ = status;
  }
  // A host store asleep on a copy's source must wake to see the run end.
  LiftAllProtections();
}

// ---------------------------------------------------------------------------
// The run thread.

absl::Status UffdBackend::Run(EventSource& program, Engine& engine, EventSink* recorder) {
  if (ran_) return absl::FailedPreconditionError("a uffd backend runs one program");
  ran_ = true;
  engine_ = &engine;
  recorder_ = recorder;
  copies_.Bind(&engine);
  start_ns_ = MonotonicNanos();
  SigintGuard sigint;
  absl::Status status = StartThreads();
  if (status.ok()) status = Execute(program);
  const bool aborted = !status.ok();
  (void)Teardown();
  RunStats& stats = engine.mutable_stats();
  stats.time_ns = Now();
  Nanos stall = 0;
  uint64_t accesses = 0;
  for (int i = 0; i < options_.sms; ++i) {
    stall += sms_[i].stall_ns;
    accesses += sms_[i].accesses;
    stats.remote_read_bytes += sms_[i].remote_read_bytes;
    stats.remote_write_bytes += sms_[i].remote_write_bytes;
  }
  stats.stall_ns = throttle_.Modelled(stall / std::max(1, options_.sms));
  stats.page_accesses = accesses;
  {
    absl::MutexLock lock(&inbox_mu_);
    stats.dropped_faults = fault_buffer_.dropped();
  }
  if (!status.ok()) return status;
  if (!aborted && verifier_.corrupted_words() > 0) {
    return absl::DataLossError(absl::StrFormat(
        "verify: %d corrupted words in %d pages checked; first: %s", verifier_.corrupted_words(),
        verifier_.pages_checked(), verifier_.first_error()));
  }
  return absl::OkStatus();
}

UffdBackend::Watch UffdBackend::StartWatch() {
  Watch watch;
  watch.progress = progress_.load();
  watch.since = MonotonicNanos();
  absl::MutexLock lock(&inbox_mu_);
  watch.faults = received_;
  return watch;
}

absl::Status UffdBackend::CheckAbort(Watch& watch) {
  {
    absl::MutexLock lock(&error_mu_);
    if (!error_.ok()) return error_;
  }
  if (SigintGuard::interrupted()) {
    return absl::CancelledError(
        "interrupted (SIGINT); the uffd device was shut down and its threads joined");
  }
  // The engine's lock is only tried: a thread stuck in a call of the
  // engine's holds it for good, and the watchdog below must still fire
  // (its error sets abort_, which lets such a call give up). A busy engine
  // is looked at on a later poll.
  if (mu_.TryLock()) {
    absl::Status health = engine_->health();
    if (health.ok()) health = engine_->invariant_status();
    mu_.Unlock();
    if (!health.ok()) return health;
  }
  const uint64_t progress = progress_.load();
  const Nanos now = MonotonicNanos();
  if (progress != watch.progress) {
    watch = StartWatch();
  } else if (now - watch.since > static_cast<Nanos>(options_.watchdog_s * 1e9)) {
    return WatchdogError(watch);
  }
  return absl::OkStatus();
}

absl::Status UffdBackend::WatchdogError(const Watch& watch) {
  // The engine's state is read under its lock; a thread that has held the
  // lock all along (for a second more, too) is the deadlock itself.
  const Nanos give_up = MonotonicNanos() + 1'000'000'000;
  while (!mu_.TryLock()) {
    if (MonotonicNanos() > give_up) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "uffd watchdog: no access completed and no transfer landed for %.0f s, and a call of "
          "the engine's (a policy's decision or a backend operation) held the engine all along: "
          "a deadlock in the policy or the backend",
          options_.watchdog_s));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  absl::Status error = WatchdogErrorLocked(watch);
  mu_.Unlock();
  return error;
}

absl::Status UffdBackend::WatchdogErrorLocked(const Watch& watch) {
  // Names the first stalled pages as the program knows them, with what the
  // device's page table and the engine say of each: a page the engine holds
  // resident and the device maps, yet whose accessor faults again and again,
  // is a re-fault livelock; an accessor that stopped faulting is a deadlock.
  absl::MutexLock lock(&inbox_mu_);
  std::vector<uint64_t> pages;
  for (const auto& [device_page, since] : stalled_) pages.push_back(device_page);
  std::sort(pages.begin(), pages.end());
  std::string named;
  constexpr size_t kNamed = 4;
  for (size_t i = 0; i < std::min(pages.size(), kNamed); ++i) {
    const uint64_t slot = pages[i] / kPagesPerBlock;
    const int index = static_cast<int>(pages[i] % kPagesPerBlock);
    const BlockNumber block = block_of_slot_[slot].load(std::memory_order_acquire);
    const BlockState* state = engine_->memory_state().Find(block);
    const char* engine_says = state == nullptr                ? "unknown"
                              : state->resident.test(index)  ? "resident"
                              : state->in_flight.test(index) ? "in flight"
                                                             : "not resident";
    absl::StrAppendFormat(&named, "%s%#x (engine: %s; device: %s)", i == 0 ? "" : ", ",
                          (FirstPageOfBlock(block) + index) * kPageSize, engine_says,
                          TestBit(bits_[slot].mapped, index)   ? "mapped"
                          : TestBit(bits_[slot].remote, index) ? "mapped remotely"
                                                               : "unmapped");
  }
  const uint64_t faults = received_ - watch.faults;
  return absl::DeadlineExceededError(absl::StrFormat(
      "uffd watchdog: no access completed and no transfer landed for %.0f s, while %d faults "
      "arrived (%s); %d pages with stalled accessors%s%s; %d fault-buffer entries, %d "
      "transfers unfinished, %d lost mappings restored",
      options_.watchdog_s, faults,
      faults > 0 ? "accessors fault again and again: a re-fault livelock"
                 : "a deadlock in the engine, the policy or the backend",
      pages.size(), pages.empty() ? "" : ", first: ", named, fault_buffer_.size(),
      transfers_ ? transfers_->unfinished() : 0, restored_.load()));
}

void UffdBackend::RecordProgram(const Event& event) {
  if (recorder_ == nullptr) return;
  DrainRecords();
  recorder_->Record(event);
}

absl::Status UffdBackend::Execute(EventSource& program) {
  KernelAssembler assembler(program);
  Watch watch = StartWatch();
  while (assembler.Next()) {
    if (absl::Status s = CheckAbort(watch); !s.ok()) return s;
    if (assembler.is_kernel()) {
      const Event& kernel_begin = assembler.kernel_begin();
      if (absl::Status s = LayOutAccesses(assembler.accesses()); !s.ok()) return s;
      if (assembler.kernel_on_host()) {
        if (absl::Status s = ExecuteHostKernel(assembler); !s.ok()) return s;
        continue;
      }
      if (absl::Status s = AwaitLaunch(kernel_begin, assembler.accesses()); !s.ok()) return s;
      // The kernel is recorded as read, like the sim does; the engine sees
      // it only once it is launched.
      {
        absl::MutexLock lock(&mu_);
        for (const Event& event : assembler.kernel_events()) RecordProgram(event);
        engine_->OnProgramEvent(kernel_begin);
      }
      if (absl::Status s = ExecuteKernel(kernel_begin); !s.ok()) return s;
      absl::MutexLock lock(&mu_);
      engine_->OnProgramEvent(assembler.kernel_end());
      continue;
    }
    const Event& event = assembler.event();
    switch (event.kind) {
      case EventKind::kAlloc:
        if (event.size > 0) {
          if (absl::Status s = EnsureSlots(BlockOfAddress(event.address),
                                           BlockOfAddress(event.address + event.size - 1) + 1);
              !s.ok()) {
            return s;
          }
        }
        ForWholePages(event.address, event.size,
                      [&](uint64_t device_page) { verifier_.MarkFresh(device_page); });
        break;
      case EventKind::kFree:
      case EventKind::kDeactivate:
        ForWholePages(event.address, event.size,
                      [&](uint64_t device_page) { verifier_.MarkGarbage(device_page); });
        break;
      case EventKind::kCopy:
        if (absl::Status s = RunCopy(event); !s.ok()) return s;
        break;
      case EventKind::kSync:
        if (absl::Status s = AwaitCopies([&] { return copies_.AllDone(); }); !s.ok()) return s;
        break;
      default:
        break;
    }
    absl::MutexLock lock(&mu_);
    RecordProgram(event);
    engine_->OnProgramEvent(event);
  }
  if (!assembler.status().ok()) return assembler.status();
  // As a process's exit waits for its device: copies still under way land.
  if (absl::Status s = AwaitCopies([&] { return copies_.AllDone(); }); !s.ok()) return s;
  if (absl::Status s = AwaitEngine([](const Engine& engine) {
        return engine.Quiescent() && !engine.servicing();
      });
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  DrainRecords();
  engine_->Finish();
  return absl::OkStatus();
}

absl::Status UffdBackend::AwaitEngine(absl::FunctionRef<bool(const Engine&)> done) {
  Watch watch = StartWatch();
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (done(*engine_)) return absl::OkStatus();
    }
    if (absl::Status s = CheckAbort(watch); !s.ok()) return s;
    // Short: a host kernel waits here for its pages, and the wait is its time.
    absl::SleepFor(absl::Microseconds(50));
  }
}

absl::Status UffdBackend::ComputeUntil(Nanos end) {
  while (MonotonicNanos() < end) {
    // A fresh watch each time: errors and SIGINT still stop the run, but
    // time spent computing does not look like a hang.
    Watch watch = StartWatch();
    if (absl::Status s = CheckAbort(watch); !s.ok()) return s;
    SleepPacing(std::min(end, MonotonicNanos() + absl::ToInt64Nanoseconds(kPollInterval)));
  }
  return absl::OkStatus();
}

absl::Status UffdBackend::LayOutAccesses(absl::Span<const Event> accesses) {
  ranges_.clear();
  total_accesses_ = 0;
  for (const Event& access : accesses) {
    if (access.size == 0) continue;
    KernelRange range;
    static_cast<AccessSpan&>(range) = AccessSpan::Of(access.address, access.size, access.rereads);
    range.start = total_accesses_;
    range.write = access.access != AccessType::kRead;
    total_accesses_ += range.pages;
    const BlockNumber first = BlockOfPage(range.first_page);
    const BlockNumber end = BlockOfPage(range.first_page + range.pages - 1) + 1;
    if (absl::Status s = EnsureSlots(first, end); !s.ok()) return s;
    for (BlockNumber block = first; block < end; ++block) {
      uint64_t slot = 0;
      FindSlot(block, slot);
      range.slots.push_back(slot);
    }
    ranges_.push_back(std::move(range));
  }
  return absl::OkStatus();
}

void UffdBackend::ForEachWrittenPage(absl::FunctionRef<void(uint64_t device_page)> fn) const {
  for (const KernelRange& range : ranges_) {
    if (!range.write) continue;
    for (uint64_t i = 0; i < range.pages; ++i) {
      const PageNumber page = range.first_page + i;
      const uint64_t slot = range.slots[BlockOfPage(page) - BlockOfPage(range.first_page)];
      fn(slot * kPagesPerBlock + PageIndexInBlock(page));
    }
  }
}

absl::Status UffdBackend::ExecuteKernel(const Event& begin) {
  Watch watch = StartWatch();
  const Nanos compute = throttle_.Dilate(begin.duration_ns);
  // A kernel that touches nothing still takes its time.
  if (total_accesses_ == 0) return ComputeUntil(MonotonicNanos() + compute);
  ++kernel_seq_;
  ForEachWrittenPage([&](uint64_t device_page) { verifier_.BeginWrite(device_page, kernel_seq_); });
  // The SMs take the (dilated) compute as on every backend (core/access_pace.h).
  const AccessPace pace = PaceOf(compute, total_accesses_, static_cast<uint64_t>(options_.sms));
  per_access_ns_ = static_cast<double>(pace.step_ps) / 1000.0;
  cursor_.store(0);
  exec_id_.store(begin.exec_id);
  // All SMs start at one instant, as on the sim, however late their
  // threads get going; until an SM runs, its first access is due now.
  kernel_start_ = MonotonicNanos();
  for (int i = 0; i < options_.sms; ++i) sms_[i].due.store(kernel_start_);
  {
    absl::MutexLock lock(&kernel_mu_);
    ++generation_;
    running_ = options_.sms;
    kernel_active_.store(true, std::memory_order_relaxed);
    kernel_cv_.SignalAll();
  }
  for (;;) {
    {
      absl::MutexLock lock(&kernel_mu_);
      if (running_ != 0) done_cv_.WaitWithTimeout(&kernel_mu_, kPollInterval);
      if (running_ == 0) break;
    }
    if (absl::Status s = CheckAbort(watch); !s.ok()) {
      kernel_active_.store(false, std::memory_order_relaxed);
      return s;
    }
  }
  kernel_active_.store(false, std::memory_order_relaxed);
  ForEachWrittenPage([&](uint64_t device_page) { verifier_.CommitWrite(device_page, kernel_seq_); });
  exec_id_.store(0);
  return absl::OkStatus();
}

// Waits for the engine to settle the host's claims, only if there is
// something to wait for (a kernel whose pages are all in host memory already
// waits 0, as on the sim), charges the wait since `claimed_at`, then runs
// `then` under the lock. A claim the engine could not settle (a page in
// storage) fails the run.
absl::Status UffdBackend::SettleHostClaims(bool settled, Nanos claimed_at,
                                           absl::FunctionRef<void()> then) {
  if (!settled) {
    if (absl::Status s = AwaitEngine([](const Engine& engine) {
          return engine.HostClaimsSettled();
        });
        !s.ok()) {
      return s;
    }
  }
  absl::MutexLock lock(&mu_);
  if (!engine_->health().ok()) return engine_->health();
  if (!settled) engine_->mutable_stats().host_wait_ns += Now() - claimed_at;
  then();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Host kernels.
//
// The CPU reaches managed memory in host memory: the engine first takes the
// kernel's pages off the device, waiting for migrations of them to land and
// writing back what the device dirtied, and holds them there (no prefetch of
// them) until the kernel ends. Then this thread reads and writes their host
// copies (UffdDevice::HostPage), the memory an eviction writes back to and a
// migration copies from, and also the memory a remote mapping shows the
// device, so remotely mapped pages need nothing more. Writes store the
// verifier's words for a version of their own, so the device's next read of
// a page the CPU wrote checks the CPU's words; reads check the host copy
// against the last committed version, so a write-back that never happened
// is caught here, as a device read catches a lost migration.
absl::Status UffdBackend::ExecuteHostKernel(const KernelAssembler& kernel) {
  // Not while a DMA copy reads or writes its buffers. A store to the source
  // of a copy to the device waits too, asleep in the kernel on the
  // source's write protection (TouchHostCopies).
  if (absl::Status s = AwaitDmaOff(kernel.accesses()); !s.ok()) return s;
  Nanos claimed_at = 0;
  bool settled = false;
  {
    absl::MutexLock lock(&mu_);
    for (const Event& event : kernel.kernel_events()) RecordProgram(event);
    ++engine_->mutable_stats().host_kernels;
    claimed_at = Now();
    // Claimed before the engine hears of the begin, so that a prefetch the
    // policy asks for at the begin already finds the pages held.
    for (const Event& access : kernel.accesses()) {
      if (access.size == 0) continue;
      engine_->ClaimForHost(access.address, access.size, access.access != AccessType::kRead);
    }
    engine_->OnProgramEvent(kernel.kernel_begin());
    settled = engine_->HostClaimsSettled();
  }
  if (absl::Status s = SettleHostClaims(settled, claimed_at, [this] { PopulateHostCopies(); });
      !s.ok()) {
    return s;
  }
  const Nanos end = MonotonicNanos() + throttle_.Dilate(kernel.kernel_begin().duration_ns);
  ++kernel_seq_;
  ForEachWrittenPage([&](uint64_t device_page) { verifier_.BeginWrite(device_page, kernel_seq_); });
  if (absl::Status s = TouchHostCopies(); !s.ok()) return s;
  ForEachWrittenPage([&](uint64_t device_page) { verifier_.CommitWrite(device_page, kernel_seq_); });
  if (absl::Status s = ComputeUntil(end); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  engine_->ReleaseHostClaims();
  engine_->OnProgramEvent(kernel.kernel_end());
  return absl::OkStatus();
}

void UffdBackend::PopulateHostCopies() {
  // Pages with no valid copy anywhere (fresh, or dropped) may hold an old
  // allocation's bytes in their host copy; a CPU's first touch must find
  // zeroes, as the device's does. The engine holds these pages until the
  // kernel ends, so nothing else writes them meanwhile.
  for (const KernelRange& range : ranges_) {
    ForEachBlockRange(range.first_page * kPageSize, range.pages * kPageSize, false,
                      [&](BlockNumber block, const PageMask& pages) {
                        const BlockState* state = engine_->memory_state().Find(block);
                        if (state == nullptr) return;
                        const PageMask fresh = state->invalid & pages;
                        if (fresh.none()) return;
                        device_->ZeroHostCopy(
                            range.slots[block - BlockOfPage(range.first_page)], fresh);
                      });
  }
}

absl::Status UffdBackend::TouchHostCopies() {
  // Checks for an abort now and then: a host kernel may touch gigabytes.
  constexpr uint64_t kPagesBetweenChecks = 1024;
  uint64_t touched = 0;
  for (const KernelRange& range : ranges_) {
    for (uint64_t i = 0; i < range.pages; ++i) {
      const PageNumber page = range.first_page + i;
      const int index = PageIndexInBlock(page);
      const uint64_t slot = range.slots[BlockOfPage(page) - BlockOfPage(range.first_page)];
      auto* words = reinterpret_cast<uint64_t*>(device_->HostPage(slot, index));
      if (range.write) {
        verifier_.WritePage(words, page * kPageSize, kernel_seq_);
      } else {
        verifier_.ReadPage(words, page * kPageSize, slot * kPagesPerBlock + index, kernel_seq_);
      }
      progress_.fetch_add(1, std::memory_order_relaxed);
      if (++touched % kPagesBetweenChecks == 0) {
        Watch watch = StartWatch();
        if (absl::Status s = CheckAbort(watch); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Slots.

absl::Status UffdBackend::EnsureSlots(BlockNumber first, BlockNumber end) {
  absl::MutexLock lock(&slots_mu_);
  std::vector<BlockNumber> missing;
  for (BlockNumber block = first; block < end; ++block) {
    if (!slot_of_.contains(block)) missing.push_back(block);
  }
  if (missing.empty()) return absl::OkStatus();
  const uint64_t base = device_->slots();
  if (absl::Status s = device_->AddSlots(missing.size()); !s.ok()) return s;
  verifier_.AddSlots(device_->slots());
  for (size_t i = 0; i < missing.size(); ++i) {
    block_of_slot_[base + i].store(missing[i], std::memory_order_release);
    slot_of_.emplace(missing[i], base + i);
  }
  return absl::OkStatus();
}

bool UffdBackend::FindSlot(BlockNumber block, uint64_t& slot) const {
  absl::ReaderMutexLock lock(&slots_mu_);
  auto it = slot_of_.find(block);
  if (it == slot_of_.end()) return false;
  slot = it->second;
  return true;
}

template <typename Fn>
void UffdBackend::ForWholePages(uint64_t address, uint64_t size, Fn fn) {
  const PageNumber first = (address + kPageSize - 1) / kPageSize;
  const PageNumber end = (address + size) / kPageSize;
  uint64_t slot = 0;
  BlockNumber cached = UINT64_MAX;
  bool known = false;
  for (PageNumber page = first; page < end; ++page) {
    if (BlockOfPage(page) != cached) {
      cached = BlockOfPage(page);
      known = FindSlot(cached, slot);
    }
    if (known) fn(slot * kPagesPerBlock + PageIndexInBlock(page));
  }
}

// ---------------------------------------------------------------------------
// SM threads.

void UffdBackend::SmLoop(int index) {
  {
    absl::MutexLock lock(&kernel_mu_);
    sms_[index].tid.store(static_cast<int>(syscall(SYS_gettid)));
    ++registered_;
    done_cv_.Signal();
  }
  uint64_t seen = 0;
  for (;;) {
    {
      absl::MutexLock lock(&kernel_mu_);
      while (!stop_sms_ && generation_ == seen) kernel_cv_.Wait(&kernel_mu_);
      if (stop_sms_) return;
      seen = generation_;
    }
    RunShare(index);
    absl::MutexLock lock(&kernel_mu_);
    if (--running_ == 0) done_cv_.Signal();
  }
}

void UffdBackend::RunShare(int index) {
  SmState& sm = sms_[index];
  const Nanos per_access = static_cast<Nanos>(std::llround(per_access_ns_));
  // The modelled instant of the next access, as a wall-clock deadline.
  Nanos deadline = kernel_start_;
  size_t range_index = 0;
  for (;;) {
    const uint64_t i = abort_.load(std::memory_order_relaxed)
                           ? total_accesses_
                           : cursor_.fetch_add(1, std::memory_order_relaxed);
    if (i >= total_accesses_) {
      PublishDue(sm, kNever);  // finished: nothing of it is left to gather
      return;
    }
    // The cursor only moves forward, so the range is at or after the last.
    while (range_index + 1 < ranges_.size() && ranges_[range_index + 1].start <= i) {
      ++range_index;
    }
    const KernelRange& range = ranges_[range_index];
    const PageNumber page = range.first_page + (i - range.start);
    const uint64_t slot = range.slots[BlockOfPage(page) - BlockOfPage(range.first_page)];
    const AccessOutcome outcome = Access(sm, slot, page, range.write);
    // Each access is followed by its compute step. A replay resumes every
    // SM it wakes at one instant, the replay's, as the sim's replay does:
    // a woken SM's access happens then, and its next is due one step
    // after it, however late the thread itself got the core.
    const Nanos instant = outcome.waited ? std::max(deadline, last_wake_.load()) : deadline;
    deadline = instant + per_access;
    if (outcome.remote) {
      // As on the sim, the SM goes on once its bytes are there or its
      // compute step is done, whichever is later.
      deadline = std::max(deadline, AccessRemotely(sm, range.BytesOf(i - range.start, 1),
                                                   range.write, instant));
    }
    const Nanos now = MonotonicNanos();
    // (Not a woken SM: all SMs of a replay must keep its one instant.)
    if (!outcome.waited && now > deadline + kPacingCatchUpNanos) deadline = now;
    PublishDue(sm, deadline);
    if (deadline - now > 20000) SleepPacing(deadline);
  }
}

void UffdBackend::PublishDue(SmState& sm, Nanos next) {
  const Nanos previous = sm.due.load(std::memory_order_relaxed);  // only this SM writes it
  // Both sequentially consistent, against the receipt that sets the
  // instant and then checks the SMs' dues: either this SM sees the new
  // instant (and wakes the service), or the service sees the new due.
  sm.due.store(next);
  const Nanos instant = gather_instant_.load();
  if (previous <= instant && next > instant) {
    absl::MutexLock lock(&inbox_mu_);
    inbox_events_.fetch_add(1, std::memory_order_release);
    inbox_cv_.Signal();
  }
}

UffdBackend::AccessOutcome UffdBackend::Access(SmState& sm, uint64_t slot, PageNumber page,
                                               bool write) {
  const int index = PageIndexInBlock(page);
  const uint64_t device_page = slot * kPagesPerBlock + index;
  SlotBits& bits = bits_[slot];
  auto* words = reinterpret_cast<uint64_t*>(device_->DevicePage(slot, index));
  EnterPage(sm, slot, device_page);
  AccessOutcome outcome;
  outcome.waited = !TestBit(bits.mapped, index) && !TestBit(bits.remote, index);
  const Nanos t0 = outcome.waited ? MonotonicNanos() : 0;
  if (write) {
    verifier_.WritePage(words, page * kPageSize, kernel_seq_);
  } else {
    verifier_.ReadPage(words, page * kPageSize, device_page, kernel_seq_);
  }
  // Which memory the touch reached: the host copy if the page is mapped
  // remotely now, also when its fault was answered with the mapping. No
  // remote mapping of the page changed since the touch, as they wait for
  // SMs touching it (MapRemote, UnmapRemote).
  outcome.remote = TestBit(bits.remote, index);
  sm.touching.store(SmState::kNotTouching);
  if (!outcome.remote) SetBit(bits.accessed, index);  // a remote page has no device frame
  ++sm.accesses;
  if (outcome.waited) sm.stall_ns += MonotonicNanos() - t0;
  progress_.fetch_add(1, std::memory_order_relaxed);
  return outcome;
}

Nanos UffdBackend::AccessRemotely(SmState& sm, uint64_t bytes, bool write, Nanos instant) {
  (write ? sm.remote_write_bytes : sm.remote_read_bytes) += bytes;
  // Loads cross host to device, stores device to host, on the lanes the
  // migrations use, each from the access's modelled instant.
  const Nanos crossed = throttle_.ReserveRemote(
      write ? LinkDirection::kDeviceToHost : LinkDirection::kHostToDevice, bytes, instant);
  return crossed + remote_latency_;
}

void UffdBackend::EnterPage(SmState& sm, uint64_t slot, uint64_t device_page) {
  // Announce first, then look (both sequentially consistent), against a
  // change of the slot's remote mappings, which marks the slot first, then
  // looks at the SMs: either it sees this SM touching, or this SM sees the
  // slot marked and keeps off until the change is done.
  for (;;) {
    sm.touching.store(device_page);
    if (remapping_slot_.load() != slot) return;
    sm.touching.store(SmState::kNotTouching);
    while (remapping_slot_.load() == slot) {
      if (abort_.load(std::memory_order_relaxed)) return;  // the run is over: just go on
      sched_yield();
    }
  }
}

// ---------------------------------------------------------------------------
// The reader thread.

void UffdBackend::OnFault(const UffdFault& fault) {
  if (fault.host) {
    // A host store to a copy's write-protected source: it sleeps until the
    // copy is done and Done() lifts the protection, which wakes it.
    protected_writes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t slot = fault.offset / kBlockSize;
  const int index = static_cast<int>((fault.offset % kBlockSize) / kPageSize);
  const uint64_t device_page = slot * kPagesPerBlock + index;
  if (fault.write_protect) {
    // The first write since the page was mapped: set its dirty bit before
    // the write can land. Under map_mu_, so the page cannot be unmapped and
    // remapped (which clears the bit) in between.
    wp_faults_.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&map_mu_);
    absl::Status s;
    if (TestBit(bits_[slot].mapped, index)) {
      // A huge frame's protection goes for all its pages at once, so all
      // of them may be written from now on without a trap: all are dirty.
      if (options_.huge_pages) {
        OrMask(bits_[slot].dirty, FullPageMask());
      } else {
        SetBit(bits_[slot].dirty, index);
      }
      s = device_->AllowWrite(device_page * kPageSize);
    } else {
      s = device_->Wake(device_page * kPageSize, kPageSize);  // it faults again, as a miss
    }
    if (!s.ok()) Fail(s);
    return;
  }
  if (TestBit(bits_[slot].mapped, index)) RestoreLostMapping(slot, index);
  uint32_t sm = UINT32_MAX;
  for (int i = 0; i < options_.sms; ++i) {
    if (sms_[i].tid.load(std::memory_order_relaxed) == static_cast<int>(fault.tid)) {
      sm = static_cast<uint32_t>(i);
    }
  }
  FaultEntry entry;
  entry.page =
      FirstPageOfBlock(block_of_slot_[slot].load(std::memory_order_acquire)) + index;
  entry.access = fault.write ? AccessType::kWrite : AccessType::kRead;
  entry.sm = sm;
  entry.exec_id = exec_id_.load(std::memory_order_relaxed);
  entry.time_ns = Now();
  // Not progress (see CheckAbort): an accessor that faults again and again
  // on the same page makes none.
  absl::MutexLock lock(&inbox_mu_);
  ++received_;
  stalled_.try_emplace(device_page, MonotonicNanos());
  if (sm != UINT32_MAX) sms_[sm].stalled_on.store(device_page);
  const bool was_empty = fault_buffer_.empty();
  if (fault_buffer_.Push(entry)) {
    if (recorder_ != nullptr) pending_records_.push_back(FaultEvent(entry));
    // The batch's instant is its earliest fault's (see BatchGathered).
    if (was_empty) gather_deadline_ = MonotonicNanos() + gather_window_;
    // Not before the latest replay: a fault that reached the buffer only
    // after it (its message was late, and the replay's flush missed it) is
    // raised again at the replay's instant, as on the sim, where the
    // replay wakes its SM to fault again at once.
    const Nanos due = sm != UINT32_MAX ? sms_[sm].due.load() : MonotonicNanos();
    const Nanos instant = std::max(due, last_wake_.load());
    if (instant < gather_instant_.load()) gather_instant_.store(instant);
  }
  inbox_events_.fetch_add(1, std::memory_order_release);
  inbox_cv_.Signal();
}

void UffdBackend::RestoreLostMapping(uint64_t slot, int index) {
  // A miss on a page the device maps. Usually a stale message: the accessor
  // faulted just before the page was mapped, and the replay wakes it. But
  // the kernel may also take a mapped page's entry away on its own (shared
  // memory reclaimed to swap, for one): no path of this backend does (Unmap
  // and ReleaseFrame run under map_mu_ and clear or require clear mapped
  // bits first), yet the engine would see only a fault on a resident page,
  // migrate nothing, replay, and the accessor would fault again forever.
  // Under map_mu_ the bit and the page table agree, so mapping the page
  // again either finds its entry (stale: nothing to do) or restores it from
  // the page cache, which still holds the frame's bytes.
  absl::MutexLock lock(&map_mu_);
  SlotBits& bits = bits_[slot];
  if (!TestBit(bits.mapped, index)) return;  // unmapped meanwhile: a real miss
  // As MapLanded left it: clean pages trap their first write (the dirty
  // bit); with huge frames, one entry covers the block.
  const bool write_protect =
      options_.huge_pages ? !Load(bits.dirty).all() : !TestBit(bits.dirty, index);
  absl::StatusOr<bool> restored = device_->RestoreMapping(slot, index, write_protect);
  if (!restored.ok()) {
    Fail(restored.status());
  } else if (*restored) {
    restored_.fetch_add(1, std::memory_order_relaxed);
  }
}

// ---------------------------------------------------------------------------
// The service thread.

bool UffdBackend::ServiceReady() const {
  return stop_service_ || !completed_.empty() || FaultsReady() ||
         (next_replay_due_ != 0 && MonotonicNanos() >= next_replay_due_);
}

bool UffdBackend::FaultsReady() const {
  return !fault_buffer_.empty() && !engine_busy_ && GatherOver();
}

bool UffdBackend::GatherOver() const {
  if (gather_window_ == 0) return true;  // throttle off: no modelled time to gather in
  return BatchGathered() || MonotonicNanos() >= gather_deadline_;
}

// How a batch is gathered. On the sim, the engine fetches once every SM that
// faults at the instant of the first fault has done so (SimBackend::Fault):
// SMs that a replay woke together resume at one instant and, when their next
// pages are missing too, fault together one compute step later, so they
// share a batch. Real threads woken together reach their next fault tens of
// microseconds apart (wake-ups, two cores for eight threads), and a service
// that fetched at the first arrival would batch them one and seven, making
// the seven wait a whole extra fault latency (measured on 16 idle cores:
// 4.6 faults a batch against the sim's 7.6, 1.6-1.9x the sim's time).
//
// So the uffd SMs keep the model's clock: each publishes the modelled
// instant of its next access (`due`: the kernel's start plus its compute
// steps, or, after a stall, the waking replay's instant plus one step), and
// a batch's instant is the earliest `due` among its faults. The batch is
// gathered when every SM is accounted for at that instant: it faulted and
// sleeps in the kernel, or its next access is due later (it hit, or paces
// ahead), or its share of the kernel is done. That is the sim's "same
// instant" rule with the modelled instants standing in for the wall-clock
// arrival order. Two alternatives fall short: waiting until every SM is
// stalled or finished would hold a fault behind SMs that keep hitting for
// as long as they do (the sim services it at once), and a window of one
// compute step after the latest fault (per_access x dilation: 1.5 us for
// mlp at dilation 8) is far shorter than the threads' wake-up spread, so it
// gathers nothing more than fetching at once does.
//
// Gathering gives up one dilated fault latency after the first fault: a
// straggler left out costs one batch of its own, which is that latency, so
// waiting longer for it can only cost more. With the throttle off nothing
// is modelled and faults are fetched at once.
//
// A gathered batch takes every buffered fault, also those that SMs which
// moved on raised a step later meanwhile, where the sim would leave them to
// a batch of their own. Taking only the batch instant's faults was tried:
// one straggler then split every later round in two (the flushed group
// faults again at the replay, the rest a step later), and mlp took 1.45x
// the sim's batches; merging heals such a split at the next batch
// (docs/uffd.md, "uffd vs sim on time").
bool UffdBackend::BatchGathered() const {
  const Nanos instant = gather_instant_.load();
  for (int i = 0; i < options_.sms; ++i) {
    const SmState& sm = sms_[i];
    if (sm.stalled_on.load() != SmState::kNotStalled) continue;
    const Nanos due = sm.due.load();
    if (due == kNever || due > instant) continue;
    return false;
  }
  return true;
}

void UffdBackend::EndGather() {
  gather_instant_.store(kNever);
  gather_deadline_ = 0;
}

void UffdBackend::AwaitServiceWork() {
  // Before sleeping, poll for work when it is expected within tens of
  // microseconds: a futex wake-up of this thread costs more than the service
  // itself on a VM whose idle vCPUs halt (backends/emu/uffd_spin.h). That is, once per
  // idle period while a kernel runs (its SMs fault, and a faulting SM waits
  // for this thread), and up to a timed replay that falls due that soon.
  // While a batch is gathered, the faults it waits for come within tens of
  // microseconds too, and are polled for until a poll comes back empty.
  bool polled = false;
  bool gather_polled = false;
  while (!ServiceReady()) {
    const Nanos now = MonotonicNanos();
    const Nanos until_due = next_replay_due_ != 0 ? next_replay_due_ - now : kNever;
    const bool gathering = !fault_buffer_.empty() && !engine_busy_;
    const Nanos until_gathered = gathering ? gather_deadline_ - now : kNever;
    Nanos budget = 0;
    bool gather_poll = false;
    if (until_due <= kServiceSpinNanos) {
      budget = until_due;
    } else if (gathering && !gather_polled) {
      budget = std::min(until_gathered, kServiceSpinNanos);
      gather_poll = true;
    } else if (!polled && kernel_active_.load(std::memory_order_relaxed)) {
      budget = kServiceSpinNanos;
      polled = true;
    }
    if (budget > 0) {
      const uint64_t seen = inbox_events_.load(std::memory_order_acquire);
      inbox_mu_.Unlock();
      const bool moved = PollForWork(seen, budget);
      inbox_mu_.Lock();
      if (gather_poll && !moved) gather_polled = true;
      continue;
    }
    // Sleep; for a replay due later, wake a little early and poll the rest.
    // A batch being gathered is woken by each fault and each SM that moves
    // past its instant, and at the latest when its window closes.
    const Nanos wait = std::min(until_due != kNever ? until_due - kServiceSpinNanos / 2
                                                    : absl::ToInt64Nanoseconds(kPollInterval),
                                until_gathered);
    inbox_cv_.WaitWithTimeout(&inbox_mu_, absl::Nanoseconds(std::max<Nanos>(wait, 0)));
  }
}

bool UffdBackend::PollForWork(uint64_t seen, Nanos budget) {
  // Fault messages are received here too, every couple of microseconds: a
  // fault then reaches the buffer without waiting for the reader to wake up
  // (the kernel still wakes the reader, which finds the queue empty), and
  // this thread services it with no hand-off at all.
  Nanos next_receive = 0;
  return SpinUntil(budget, [&] {
    if (inbox_events_.load(std::memory_order_acquire) != seen) return true;
    const Nanos now = MonotonicNanos();
    if (now < next_receive) return false;
    next_receive = now + kReceiveEveryNanos;
    device_->ReceivePending();
    return inbox_events_.load(std::memory_order_acquire) != seen;
  });
}

void UffdBackend::ServiceLoop() {
  // Timed replays (throttle on) end a timed wait; the default 50 us timer
  // slack would make them late by more than the modelled fault latency.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  for (;;) {
    {
      absl::MutexLock lock(&inbox_mu_);
      AwaitServiceWork();
      if (stop_service_) return;
    }
    absl::MutexLock lock(&mu_);
    DriveEngine(/*notify=*/false);
  }
}

void UffdBackend::DriveEngine(bool notify) {
  // Landed transfers go to the engine in the order they landed; both
  // threads that call this take them from the inbox under mu_.
  std::vector<std::pair<TransferId, Nanos>> done;
  {
    absl::MutexLock inbox(&inbox_mu_);
    done.swap(completed_);
  }
  for (const auto& [id, landed_at] : done) {
    delivering_landed_at_ = landed_at;
    listener_->OnTransferComplete(id);
  }
  delivering_landed_at_ = 0;
  if (!done.empty()) {
    // A landed chunk frees the migration thread; frames freed may let the
    // next land, and destinations that left the device let staging go on.
    std::vector<TransferId> ids;
    for (const auto& [id, landed_at] : done) ids.push_back(id);
    if (absl::Status s = copies_.OnTransfersComplete(ids, Now()); !s.ok()) Fail(s);
  }
  // Replays that were waiting for their time.
  const Nanos now = MonotonicNanos();
  std::vector<TimedReplay> due;
  auto split = std::stable_partition(timed_replays_.begin(), timed_replays_.end(),
                                     [now](const TimedReplay& r) { return r.due > now; });
  due.assign(split, timed_replays_.end());
  timed_replays_.erase(split, timed_replays_.end());
  for (const TimedReplay& replay : due) ApplyReplay(replay.policy, replay.block, replay.due);
  if (!engine_->servicing()) engine_->ServiceFaults();
  DrainRecords();
  Nanos next_due = 0;
  for (const TimedReplay& r : timed_replays_) {
    next_due = next_due == 0 ? r.due : std::min(next_due, r.due);
  }
  absl::MutexLock inbox(&inbox_mu_);
  engine_busy_ = engine_->servicing();
  next_replay_due_ = next_due;
  if (notify) {
    // The service thread has not seen this: faults may be ready now.
    inbox_events_.fetch_add(1, std::memory_order_release);
    inbox_cv_.Signal();
  }
}

void UffdBackend::DrainRecords() {
  std::vector<Event> records;
  {
    absl::MutexLock lock(&inbox_mu_);
    records.swap(pending_records_);
  }
  if (recorder_ == nullptr) return;
  for (const Event& event : records) recorder_->Record(event);
}

size_t UffdBackend::FetchFaults(absl::Span<FaultEntry> out) {
  absl::MutexLock lock(&inbox_mu_);
  // Faults still being gathered wait for the rest of their batch, also when
  // the engine asks on its own right after a replay (the SMs it woke may
  // have faulted again already, one by one); the service thread fetches
  // them once gathered (FaultsReady).
  if (fault_buffer_.empty() || !GatherOver()) return 0;
  if (gather_window_ > 0 && !BatchGathered()) ++ungathered_batches_;
  // A batch is dated by its gathered instant, but never before the latest
  // replay (the engine services one batch at a time) nor after now.
  fetched_instant_ =
      std::min(std::max(gather_instant_.load(), last_wake_.load()), MonotonicNanos());
  const size_t count = fault_buffer_.Fetch(out);
  if (fault_buffer_.empty()) EndGather();
  return count;
}

Nanos UffdBackend::FetchedBatchInstant() const {
  if (gather_window_ == 0) return Now();  // nothing modelled, nothing to hide
  absl::MutexLock lock(&inbox_mu_);
  return throttle_.Modelled(std::max(fetched_instant_, start_ns_) - start_ns_);
}

Nanos UffdBackend::ReadyAt(Nanos not_before) const {
  const Nanos wall = MonotonicNanos();
  return wall + throttle_.Dilate(std::max<Nanos>(0, not_before - Now()));
}

void UffdBackend::Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) {
  const Nanos due = ReadyAt(not_before);
  const Nanos now = MonotonicNanos();
  if (due > now) {
    timed_replays_.push_back(TimedReplay{due, policy, block});
    absl::MutexLock lock(&inbox_mu_);
    next_replay_due_ = next_replay_due_ == 0 ? due : std::min(next_replay_due_, due);
    inbox_events_.fetch_add(1, std::memory_order_release);
    inbox_cv_.Signal();
    return;
  }
  // Due already. In the model it happens when it fell due or when the
  // transfer whose landing triggered it landed, whichever is later: the
  // host's delays since (handing the completion over, this call) are not
  // modelled time, so the SMs it wakes resume from that instant.
  const Nanos fell_due = start_ns_ + throttle_.Dilate(not_before);
  ApplyReplay(policy, block, std::min(now, std::max(fell_due, delivering_landed_at_)));
}

void UffdBackend::ApplyReplay(ReplayPolicy policy, BlockNumber block, Nanos instant) {
  // The instant the woken SMs resume from (RunShare), and the earliest
  // instant of any batch fetched from now on (FetchFaults). Only this
  // thread, under mu_, writes it; it never goes back.
  if (instant > last_wake_.load()) last_wake_.store(instant);
  uint64_t slot = UINT64_MAX;
  if (policy == ReplayPolicy::kBlock && !FindSlot(block, slot)) return;
  // (device page, entry time), for the pages whose accessors are woken now.
  std::vector<std::pair<uint64_t, Nanos>> pages;
  {
    absl::MutexLock lock(&inbox_mu_);
    // Entries still buffered belong to accessors about to be woken; they
    // would fault again anyway (UVM's BATCH_FLUSH).
    if (policy != ReplayPolicy::kBlock) {
      fault_buffer_.Flush();
      EndGather();
    }
    // The SMs it wakes are stalled no more (BatchGathered), from before
    // they can run.
    for (int i = 0; i < options_.sms; ++i) {
      const uint64_t page = sms_[i].stalled_on.load();
      if (page != SmState::kNotStalled && (slot == UINT64_MAX || page / kPagesPerBlock == slot)) {
        sms_[i].stalled_on.store(SmState::kNotStalled);
      }
    }
    for (auto it = stalled_.begin(); it != stalled_.end();) {
      if (slot != UINT64_MAX && it->first / kPagesPerBlock != slot) {
        ++it;
        continue;
      }
      pages.push_back(*it);
      stalled_.erase(it++);
    }
  }
  if (pages.empty()) return;
  std::sort(pages.begin(), pages.end());
  // A fault's service ends when UFFDIO_WAKE has returned for its page: the
  // thread is runnable from then on. So the latency is stamped after the
  // wake, per run of pages woken by one call.
  std::vector<Nanos> latencies;
  latencies.reserve(pages.size());
  for (size_t i = 0; i < pages.size();) {
    size_t j = i + 1;
    while (j < pages.size() && pages[j].first == pages[j - 1].first + 1) ++j;
    if (absl::Status s = device_->Wake(pages[i].first * kPageSize, (j - i) * kPageSize);
        !s.ok()) {
      Fail(s);
    }
    const Nanos woken = MonotonicNanos();
    for (; i < j; ++i) latencies.push_back(woken - pages[i].second);
  }
  absl::MutexLock lock(&inbox_mu_);
  const size_t room = kMaxLatencySamples - std::min(kMaxLatencySamples, latencies_.size());
  latencies_.insert(latencies_.end(), latencies.begin(),
                    latencies.begin() + static_cast<ptrdiff_t>(std::min(room, latencies.size())));
}

// ---------------------------------------------------------------------------
// Data movement and the page table.

bool UffdBackend::SlotOrFail(BlockNumber block, uint64_t& slot) {
  if (FindSlot(block, slot)) return true;
  if (absl::Status s = EnsureSlots(block, block + 1); !s.ok()) {
    Fail(s);
    return false;
  }
  return FindSlot(block, slot);
}

void UffdBackend::Migrate(const Transfer& transfer) {
  uint64_t slot = 0;
  if (!SlotOrFail(transfer.block, slot)) return;
  {
    absl::MutexLock lock(&map_mu_);
    ++bits_[slot].in_flight;
  }
  transfers_->Submit(transfer, ReadyAt(transfer.not_before));
}

bool UffdBackend::WholeBlockOrFail(uint64_t slot, const PageMask& pages, const char* what) {
  if (!options_.huge_pages || pages == FullPageMask()) return true;
  Fail(absl::FailedPreconditionError(absl::StrFormat(
      "backend uffd: huge_pages=true maps whole 2 MiB blocks only, and the engine %s %d of "
      "block %#x's %d pages (this policy or program works on parts of blocks): drop huge_pages",
      what, pages.count(), block_of_slot_[slot] * kBlockSize, kPagesPerBlock)));
  return false;
}

void UffdBackend::UnmapLocked(uint64_t slot, const PageMask& pages) {
  SlotBits& bits = bits_[slot];
  const PageMask mapped = Load(bits.mapped);
  if ((pages & mapped).any() && !WholeBlockOrFail(slot, pages & mapped, "unmapped")) return;
  const bool had = mapped.any();
  ClearMask(bits.mapped, pages);
  absl::Status s;
  if ((mapped & ~pages).none() && mapped.any()) {
    // Nothing else of the block stays mapped: one call over the span
    // instead of one per run (a randomly touched block has hundreds).
    int first = static_cast<int>(mapped._Find_first());
    int last = first;
    for (size_t i = mapped._Find_next(first); i < mapped.size(); i = mapped._Find_next(i)) {
      last = static_cast<int>(i);
    }
    s = device_->Unmap(slot, PageRangeMask(first, last - first + 1));
  } else {
    s = device_->Unmap(slot, pages);
  }
  if (!s.ok()) Fail(s);
  if (had && Load(bits.mapped).none()) --mapped_frames_;
}

void UffdBackend::Evict(const Transfer& transfer) {
  uint64_t slot = 0;
  if (!FindSlot(transfer.block, slot)) {
    Fail(absl::InternalError(absl::StrFormat("evicting block %#x, which has no device slot",
                                             transfer.block * kBlockSize)));
    return;
  }
  Transfer writeback = transfer;
  {
    // Unmap first: from here every touch faults, so the dirty bits are
    // final and nobody writes the bytes being written back.
    absl::MutexLock lock(&map_mu_);
    UnmapLocked(slot, transfer.pages);
    const PageMask dirty = Load(bits_[slot].dirty) & transfer.pages;
    auto it = queried_dirty_.find(transfer.block);
    const PageMask seen = it == queried_dirty_.end() ? PageMask() : it->second;
    // Written after the engine looked: must go home too, or it is lost.
    const PageMask late = dirty & ~seen;
    writeback.copy |= late;
    // Going to storage, the whole write-back goes there.
    if (writeback.storage.any()) writeback.storage = writeback.copy;
    late_dirty_.fetch_add(late.count(), std::memory_order_relaxed);
    ClearMask(bits_[slot].dirty, transfer.pages);
    ClearMask(bits_[slot].accessed, transfer.pages);
    ++bits_[slot].in_flight;  // the bytes stay until written back
  }
  queried_dirty_.erase(transfer.block);
  transfers_->Submit(writeback, ReadyAt(transfer.not_before));
}

void UffdBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  uint64_t slot = 0;
  if (!FindSlot(block, slot)) return;
  absl::MutexLock lock(&map_mu_);
  UnmapLocked(slot, pages);
  ClearMask(bits_[slot].dirty, pages);
  ClearMask(bits_[slot].accessed, pages);
  MaybeReleaseLocked(slot);
}

// A remote mapping changes the device range under SMs that may be touching
// those very pages. Both directions keep the SMs off the slot while they run
// (remapping_slot_, EnterPage) and first wait for the SMs already in an
// access to its pages (SmState::touching, kept until the SM has read the
// page's remote bit again after its touch, so that it knows which memory it
// reached):
//   - MapRemote: the pages are not on the device, so such an SM faults on
//     them; once its fault is received it sleeps in the kernel until the
//     replay, after which its retry takes the new mapping (an answered
//     fault, as on the sim). Those are not waited for; the others finish.
//   - UnmapRemote: the old mapping may not be touched at all while device
//     memory replaces it (UffdDevice::UnmapHostCopy). SMs asleep in a fault
//     on these pages since before they were mapped are woken first, and
//     take the host copy, as their replay would have let them; then every
//     SM in an access to them is waited for. (Whether an SM is asleep is not
//     known for sure: a fault message is handled a moment after it is
//     read, and a replay may wake its SM in between.)
void UffdBackend::MapRemote(BlockNumber block, const PageMask& pages, const PageMask& fresh) {
  uint64_t slot = 0;
  if (!SlotOrFail(block, slot)) return;
  remapping_slot_.store(slot);
  AwaitAccessorsOf(slot, pages, /*asleep_in_fault=*/true);
  {
    absl::MutexLock lock(&map_mu_);
    OrMask(bits_[slot].remote, pages);
    if (absl::Status s = device_->MapHostCopy(slot, pages, fresh); !s.ok()) Fail(s);
  }
  remapping_slot_.store(kNoSlot);
}

void UffdBackend::UnmapRemote(BlockNumber block, const PageMask& pages) {
  uint64_t slot = 0;
  if (!FindSlot(block, slot)) return;
  const PageMask remote = Load(bits_[slot].remote) & pages;
  if (remote.none()) return;
  remapping_slot_.store(slot);
  {
    absl::MutexLock lock(&inbox_mu_);
    for (int i = 0; i < options_.sms; ++i) {
      const uint64_t page = sms_[i].stalled_on.load();
      if (page / kPagesPerBlock == slot && remote.test(page % kPagesPerBlock)) {
        sms_[i].stalled_on.store(SmState::kNotStalled);
      }
    }
    // Their faults are answered: no replay need wake them again.
    for (auto it = stalled_.begin(); it != stalled_.end();) {
      const bool answered =
          it->first / kPagesPerBlock == slot && remote.test(it->first % kPagesPerBlock);
      if (answered) {
        stalled_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  ForEachPageRun(remote, [&](int first, int count) {
    if (absl::Status s = device_->Wake((slot * kPagesPerBlock + first) * kPageSize,
                                       count * kPageSize);
        !s.ok()) {
      Fail(s);
    }
  });
  AwaitAccessorsOf(slot, remote, /*asleep_in_fault=*/false);
  {
    absl::MutexLock lock(&map_mu_);
    if (absl::Status s = device_->UnmapHostCopy(slot, remote); !s.ok()) Fail(s);
    ClearMask(bits_[slot].remote, remote);
  }
  remapping_slot_.store(kNoSlot);
}

void UffdBackend::AwaitAccessorsOf(uint64_t slot, const PageMask& pages, bool asleep_in_fault) {
  auto in_the_way = [&] {
    for (int i = 0; i < options_.sms; ++i) {
      const uint64_t page = sms_[i].touching.load();
      if (page == SmState::kNotTouching || page / kPagesPerBlock != slot ||
          !pages.test(page % kPagesPerBlock)) {
        continue;
      }
      if (asleep_in_fault && sms_[i].stalled_on.load() == page) continue;
      return true;
    }
    return false;
  };
  while (in_the_way() && !abort_.load(std::memory_order_relaxed)) {
    // An SM that faulted waits to be received: receive it here, rather
    // than wait for the reader thread to wake up.
    device_->ReceivePending();
    sched_yield();
  }
}

void UffdBackend::MaybeReleaseLocked(uint64_t slot) {
  SlotBits& bits = bits_[slot];
  if (!bits.holds_memory || bits.in_flight > 0 || Load(bits.mapped).any()) return;
  // The frame's memory is at its fullest just before it goes.
  peak_device_bytes_ = std::max(peak_device_bytes_, device_->DeviceBytesAllocated());
  if (absl::Status s = device_->ReleaseFrame(slot); !s.ok()) Fail(s);
  bits.holds_memory = false;
  --frames_held_;
}

PageUse UffdBackend::QueryUse(BlockNumber block) const {
  uint64_t slot = 0;
  if (!FindSlot(block, slot)) return PageUse{};
  PageUse use{Load(bits_[slot].accessed), Load(bits_[slot].dirty)};
  use.accessed &= Load(bits_[slot].mapped);
  queried_dirty_[block] = use.dirty;
  return use;
}

void UffdBackend::Copy(const Transfer& transfer) {
  uint64_t slot = 0;
  if (!FindSlot(transfer.block, slot)) return;
  absl::Status s;
  if (transfer.kind == TransferKind::kEviction) {
    s = device_->CopyOut(slot, transfer.copy);
    // Through the host copy to the storage file, which then holds the only
    // copy (the host's pages are freed).
    if (s.ok() && transfer.storage.any()) s = device_->StoreHostCopy(slot, transfer.storage);
  } else {
    if (transfer.storage.any()) {
      s = device_->LoadHostCopy(slot, transfer.storage);
      if (!s.ok()) {
        Fail(s);
        return;
      }
    }
    {
      absl::MutexLock lock(&map_mu_);
      if (!bits_[slot].holds_memory) {
        bits_[slot].holds_memory = true;
        peak_frames_held_ = std::max(peak_frames_held_, ++frames_held_);
      }
    }
    s = device_->CopyIn(slot, transfer.copy, transfer.pages & ~transfer.copy);
  }
  if (!s.ok()) Fail(s);
}

void UffdBackend::Land(const Transfer& transfer) {
  uint64_t slot = 0;
  if (!FindSlot(transfer.block, slot)) return;
  absl::MutexLock lock(&map_mu_);
  if (transfer.kind != TransferKind::kEviction) MapLanded(transfer, slot);
  --bits_[slot].in_flight;
  MaybeReleaseLocked(slot);
}

void UffdBackend::MapLanded(const Transfer& transfer, uint64_t slot) {
  SlotBits& bits = bits_[slot];
  const PageMask mapped = Load(bits.mapped);
  if (mapped.none()) {
    if (mapped_frames_ >= capacity_frames_) {
      Fail(absl::InternalError(absl::StrFormat(
          "device memory full: block %#x needs a frame and all %d are taken",
          transfer.block * kBlockSize, capacity_frames_)));
      return;
    }
    ++mapped_frames_;
  }
  const PageMask pages = transfer.pages & ~mapped;
  if (!WholeBlockOrFail(slot, pages, "migrated")) return;
  // Zero-filled pages hold the only valid copy from now on: dirty at once,
  // and mapped writable. Copied pages are clean until their first write.
  const PageMask zeroed = pages & ~transfer.copy;
  ClearMask(bits.accessed, pages);
  ClearMask(bits.dirty, pages & transfer.copy);
  OrMask(bits.dirty, zeroed);
  absl::Status s;
  if (options_.huge_pages) {
    // One PMD: write-protected if any page is a clean copy (its first
    // write must trap), writable if all were zero-filled (all dirty).
    s = device_->Map(slot, pages, /*write_protect=*/(pages & transfer.copy).any());
  } else {
    s = device_->Map(slot, pages & transfer.copy, /*write_protect=*/true);
    if (s.ok()) s = device_->Map(slot, zeroed, /*write_protect=*/false);
  }
  if (!s.ok()) {
    Fail(s);
    return;
  }
  OrMask(bits.mapped, pages);
}

void UffdBackend::Completed(TransferId id, Nanos landed_at) {
  progress_.fetch_add(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&inbox_mu_);
    completed_.emplace_back(id, landed_at);
    inbox_events_.fetch_add(1, std::memory_order_release);
  }
  // A worker (throttle on) hands its landing to the engine itself when the
  // engine is free: the service thread sleeps while a batch's transfers are
  // on the link, and waking it costs tens to hundreds of microseconds that
  // the replay, and every SM it wakes, would wait for. (With the throttle
  // off this runs inside the engine's own call, on the service thread.)
  if (throttle_.enabled() && mu_.TryLock()) {
    DriveEngine(/*notify=*/true);
    mu_.Unlock();
    return;
  }
  absl::MutexLock lock(&inbox_mu_);
  inbox_cv_.Signal();
}

// ---------------------------------------------------------------------------
// Checks and counters.

absl::Status UffdBackend::CheckConsistency(const Engine& engine) const {
  uint64_t frames = 0;
  for (const BlockState& block : engine.memory_state().blocks()) {
    uint64_t slot = 0;
    const bool has_slot = FindSlot(block.number, slot);
    const PageMask mapped = has_slot ? Load(bits_[slot].mapped) : PageMask();
    const PageMask remote = has_slot ? Load(bits_[slot].remote) : PageMask();
    if (mapped != block.resident) {
      return absl::InternalError(absl::StrFormat(
          "block %#x: the device maps %d pages but the engine records %d resident",
          block.number * kBlockSize, mapped.count(), block.resident.count()));
    }
    if (remote != block.remote) {
      return absl::InternalError(absl::StrFormat(
          "block %#x: the device maps %d pages remotely but the engine records %d",
          block.number * kBlockSize, remote.count(), block.remote.count()));
    }
    if ((remote & mapped).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x: %d pages are mapped both on the device and remotely",
          block.number * kBlockSize, (remote & mapped).count()));
    }
    if (mapped.any()) ++frames;
  }
  if (frames > capacity_frames_) {
    return absl::InternalError(absl::StrFormat("%d device frames mapped, capacity %d", frames,
                                               capacity_frames_));
  }
  return absl::OkStatus();
}

UffdCounters UffdBackend::counters() const {
  UffdCounters c;
  {
    absl::MutexLock lock(&inbox_mu_);
    c.received_faults = received_;
    c.ungathered_batches = ungathered_batches_;
  }
  c.write_protect_faults = wp_faults_.load();
  c.protected_source_writes = protected_writes_.load();
  c.late_dirty_pages = late_dirty_.load();
  c.restored_mappings = restored_.load();
  c.pages_checked = verifier_.pages_checked();
  c.corrupted_words = verifier_.corrupted_words();
  c.zeroed_pages_read = verifier_.zeroed_pages_read();
  c.slots = device_ ? device_->slots() : 0;
  c.huge_frames = options_.huge_pages;
  {
    absl::MutexLock lock(&map_mu_);
    c.frames_held = frames_held_;
    c.peak_frames_held = peak_frames_held_;
    c.peak_device_bytes = peak_device_bytes_;
  }
  c.device_bytes = device_ ? device_->DeviceBytesAllocated() : 0;
  return c;
}

std::vector<Nanos> UffdBackend::service_latencies() const {
  absl::MutexLock lock(&inbox_mu_);
  return latencies_;
}

// ---------------------------------------------------------------------------
// Registration.

UMLAB_REGISTER_BACKEND(
    uffd,
    {"uffd",
     "real page faults on a userfaultfd-registered range, real threads and data, "
     "real-time PCIe throttle (Linux, no GPU)",
     {
         {"dilation", ParamType::kDouble, "4",
          "wall time = modelled time x this, for link, fault latency and compute",
          ParamRange::Positive()},
         {"throttle", ParamType::kBool, "true",
          "enforce modelled times; false runs as fast as the host allows"},
         {"verify", ParamType::kBool, "false", "check every word read against the last write"},
         {"sms", ParamType::kInt, "8", "SM threads issuing accesses", ParamRange::Closed(1, 1024)},
         {"watchdog_s", ParamType::kDouble, "120",
          "fail when nothing progresses for this many seconds", ParamRange::Positive()},
         {"max_gib", ParamType::kInt, "64", "size of the device address range, GiB",
          ParamRange::Closed(1, 1 << 20)},
         {"huge_pages", ParamType::kBool, "false",
          "frames are 2 MiB hugetlb pages, mapped whole (fast migration; needs "
          "vm.nr_hugepages >= capacity and a whole-block policy)"},
         {"storage_dir", ParamType::kString, "/var/tmp",
          "with a device that has storage (ssd=true): the directory for its file, written and "
          "read through io_uring (O_DIRECT where the filesystem allows it)"},
         {"device_dir", ParamType::kString, "",
          "tmpfs directory for device memory (empty: a memfd); mounted with "
          "huge=within_size, frames are 2 MiB folios mapped per 4 KiB page (fast "
          "migration into released frames, any policy)"},
     },
     [](const ParamMap& params, const DeviceConfig& device,
        uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
       UffdOptions options;
       options.dilation = params.Double("dilation");
       options.throttle = params.Bool("throttle");
       options.verify = params.Bool("verify");
       options.sms = static_cast<int>(params.Int("sms"));
       options.watchdog_s = params.Double("watchdog_s");
       options.huge_pages = params.Bool("huge_pages");
       options.device_dir = params.String("device_dir");
       options.storage_dir = params.String("storage_dir");
       const int64_t gib = params.Int("max_gib");
       options.max_blocks = static_cast<uint64_t>(gib) * (1 << 30) / kBlockSize;
       absl::StatusOr<std::unique_ptr<UffdBackend>> backend =
           UffdBackend::Create(device, capacity_frames, options);
       if (!backend.ok()) return backend.status();
       return std::unique_ptr<Backend>(std::move(*backend));
     },
     {.storage_tier = true}});

}  // namespace umlab
