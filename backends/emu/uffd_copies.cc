// The uffd backend's copies (kCopy, docs/hum.md): the order is
// CopyStream's, the same as the sim's; the bytes are real.
//
// - A host buffer's bytes live in the host copies of its blocks' slots
//   (given out when a copy or a host kernel first names them): host memory
//   the device range never maps, since no device kernel touches it.
// - A DMA copy is the copy-engine thread's: it books the link at the copy
//   rate (PcieThrottle::ReserveDma) and moves the bytes while the booking
//   runs, each device page where it lives now (device memory
//   through the unregistered alias, marked dirty; or its host copy), and
//   writes host buffers with pwrite, past the CPU's page table, as a DMA
//   engine does.
// - A host access is the run thread's own, as a host kernel's: the engine
//   takes both buffers off the device first (Engine::ClaimForHost).
// - A hidden copy is staged by CopyThreads() staging threads, each copying
//   one 2 MB chunk of the source into the destination's host copies and
//   taking at least the chunk's modelled staging time (dilated); the stream
//   then lands chunks one at a time through the engine's migration
//   (Engine::LandCopy), which the host-to-device transfer worker carries
//   out on the throttle like any other.
// - The source of a copy to the device is write-protected with userfaultfd
//   from its issue until it is done (Issued, Done): a host store to it
//   sleeps in the kernel meanwhile, and lifting the protection wakes it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "backends/emu/uffd_backend.h"
#include "core/copy_command.h"
#include "core/policy.h"

namespace umlab {

// ---------------------------------------------------------------------------
// The run thread.

absl::Status UffdBackend::RunCopy(const Event& event) {
  absl::StatusOr<CopyCommand> copy = CopyOf(event);  // the assembler checked it
  if (!copy.ok()) return copy.status();
  for (uint64_t address : {copy->device_address, copy->host_address}) {
    if (absl::Status s = EnsureSlots(BlockOfAddress(address),
                                     BlockOfAddress(address + copy->size - 1) + 1);
        !s.ok()) {
      return s;
    }
  }
  // What the destination holds from now on: the source's content as the
  // copy is issued. A kernel that reads it before the bytes are there fails
  // --verify.
  if (options_.verify) {
    const bool in = copy->to_device();
    verifier_.Copy(in ? copy->device_address : copy->host_address,
                   in ? copy->host_address : copy->device_address, copy->size,
                   [&](uint64_t address) { return DevicePageOf(address); });
  }
  CopyId id = 0;
  CopyMode mode = CopyMode::kDma;
  {
    absl::MutexLock lock(&mu_);
    id = engine_->mutable_stats().copies++;
    mode = engine_->policy().HowToCopy(*copy);
  }
  if (mode == CopyMode::kHostAccess) return CopyAsHostAccess(*copy);
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = copies_.Issue(id, *copy, mode, Now()); !s.ok()) return s;
  }
  return AwaitCopies([&] { return !copies_.HoldsHost(); });
}

absl::Status UffdBackend::CopyAsHostAccess(const CopyCommand& copy) {
  Event device_side, host_side;
  device_side.address = copy.device_address;
  host_side.address = copy.host_address;
  device_side.size = host_side.size = copy.size;
  device_side.access = copy.to_device() ? AccessType::kWrite : AccessType::kRead;
  host_side.access = copy.to_device() ? AccessType::kRead : AccessType::kWrite;
  if (absl::Status s = AwaitDmaOff({device_side, host_side}); !s.ok()) return s;
  const uint64_t destination = copy.to_device() ? copy.device_address : copy.host_address;
  const uint64_t source = copy.to_device() ? copy.host_address : copy.device_address;
  Nanos claimed_at = 0;
  bool settled = false;
  {
    absl::MutexLock lock(&mu_);
    claimed_at = Now();
    engine_->ClaimForHost(copy.device_address, copy.size, copy.to_device());
    engine_->ClaimForHost(copy.host_address, copy.size, !copy.to_device());
    settled = engine_->HostClaimsSettled();
  }
  if (absl::Status s = SettleHostClaims(settled, claimed_at,
                                        [&] { ZeroFreshEdges(destination, copy.size); });
      !s.ok()) {
    return s;
  }
  // Without the engine's lock: a store into a write-protected source of a
  // copy still under way sleeps here until that copy is done.
  CopyHostBytes(destination, source, copy.size);
  progress_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  engine_->ReleaseHostClaims();
  return absl::OkStatus();
}

absl::Status UffdBackend::AwaitCopies(absl::FunctionRef<bool()> done) {
  const Nanos start = Now();
  Watch watch = StartWatch();
  for (bool waited = false;; waited = true) {
    {
      absl::MutexLock lock(&mu_);
      if (done()) {
        if (waited) engine_->mutable_stats().copy_wait_ns += Now() - start;
        return absl::OkStatus();
      }
    }
    if (absl::Status s = CheckAbort(watch); !s.ok()) return s;
    absl::SleepFor(absl::Microseconds(50));
  }
}

absl::Status UffdBackend::AwaitLaunch(const Event& begin, absl::Span<const Event> accesses) {
  bool early = false;
  absl::Status refused;
  if (!options_.launch_ignoring_copies_for_testing) {
    if (absl::Status s = AwaitCopies([&] {
          absl::StatusOr<bool> may = copies_.MayLaunch(begin.exec_id, accesses, early);
          if (!may.ok()) refused = may.status();
          return !may.ok() || *may;
        });
        !s.ok()) {
      return s;
    }
  }
  if (!refused.ok()) return refused;
  absl::MutexLock lock(&mu_);
  if (early) ++engine_->mutable_stats().early_launches;
  copies_.NoteKernelLaunched();
  return absl::OkStatus();
}

absl::Status UffdBackend::AwaitDmaOff(absl::Span<const Event> accesses) {
  return AwaitCopies([&] {
    return std::none_of(accesses.begin(), accesses.end(), [&](const Event& access) {
      return access.size > 0 &&
             copies_.DmaTouches(access.address, access.size, access.access != AccessType::kRead);
    });
  });
}

// ---------------------------------------------------------------------------
// CopyStream::Mover (under mu_).

void UffdBackend::Issued(CopyId id, const CopyCommand& copy) {
  absl::MutexLock lock(&protect_mu_);
  if (protections_lifted_) return;
  protected_.emplace(id, copy);
  ProtectHostRange(copy.host_address, copy.size, true);
}

void UffdBackend::Done(CopyId id, const CopyCommand& copy) {
  absl::MutexLock lock(&protect_mu_);
  if (protected_.erase(id) == 0 || protections_lifted_) return;
  // Lifts the pages no other copy under way still reads, in runs.
  const uint64_t first = copy.host_address / kPageSize;
  const uint64_t end = (copy.host_address + copy.size + kPageSize - 1) / kPageSize;
  uint64_t run = end;
  for (uint64_t page = first; page <= end; ++page) {
    const bool still = page < end && std::any_of(protected_.begin(), protected_.end(),
                                                 [&](const auto& entry) {
                                                   const CopyCommand& other = entry.second;
                                                   return other.host_address <
                                                              (page + 1) * kPageSize &&
                                                          page * kPageSize <
                                                              other.host_address + other.size;
                                                 });
    if (page < end && !still) {
      if (run == end) run = page;
      continue;
    }
    if (run != end) {
      ProtectHostRange(run * kPageSize, (page - run) * kPageSize, false);
      run = end;
    }
  }
}

TransferId UffdBackend::StartDma(CopyId id, const CopyCommand& copy) {
  StartCopyThreads(/*dma=*/true);
  CopyJob job;
  job.copy = id;
  job.dma = next_dma_++;
  job.command = copy;
  absl::MutexLock lock(&copy_jobs_mu_);
  dma_jobs_.push_back(job);
  copy_jobs_cv_.SignalAll();
  return job.dma;
}

void UffdBackend::Stage(CopyId id, size_t chunk, uint64_t destination, uint64_t source,
                        uint64_t bytes, Nanos modelled) {
  // The destination has left the device (CopyStream waits for that), so its
  // host copies are its only bytes; nothing else writes them until it lands.
  ZeroFreshEdges(destination, bytes);
  StartCopyThreads(/*dma=*/false);
  CopyJob job;
  job.copy = id;
  job.chunk = chunk;
  job.destination = destination;
  job.source = source;
  job.bytes = bytes;
  job.modelled = modelled;
  absl::MutexLock lock(&copy_jobs_mu_);
  stage_jobs_.push_back(job);
  copy_jobs_cv_.SignalAll();
}

void UffdBackend::StartCopyThreads(bool dma) {
  {
    absl::MutexLock lock(&copy_jobs_mu_);
    if (stop_copies_) return;  // the run is being torn down
  }
  if (dma) {
    if (dma_thread_started_) return;
    dma_thread_started_ = true;
    copy_threads_.push_back(StartQuietHelper([this] { CopyThreadLoop(true); }));
    return;
  }
  const size_t threads = static_cast<size_t>(std::max(1, engine_->policy().CopyThreads()));
  while (stage_threads_ < threads) {
    ++stage_threads_;
    copy_threads_.push_back(StartQuietHelper([this] { CopyThreadLoop(false); }));
  }
}

// ---------------------------------------------------------------------------
// The copy threads.

void UffdBackend::CopyThreadLoop(bool dma) {
  for (;;) {
    CopyJob job;
    {
      absl::MutexLock lock(&copy_jobs_mu_);
      std::deque<CopyJob>& queue = dma ? dma_jobs_ : stage_jobs_;
      while (!stop_copies_ && queue.empty()) copy_jobs_cv_.Wait(&copy_jobs_mu_);
      if (stop_copies_) return;
      job = queue.front();
      queue.pop_front();
    }
    if (dma) {
      RunDma(job);
    } else {
      StageChunk(job);
    }
  }
}

void UffdBackend::PaceUntil(Nanos deadline) {
  while (!abort_.load(std::memory_order_relaxed) && MonotonicNanos() < deadline) {
    SleepUntilNanos(std::min(deadline, MonotonicNanos() + 1000000));
  }
}

void UffdBackend::StageChunk(const CopyJob& job) {
  const Nanos start = MonotonicNanos();
  // Through the host memfd: the source is write-protected, and a host
  // store that sleeps on it is ordered after this read only by the kernel,
  // which a race detector cannot see; a read through the file is the
  // kernel's own.
  for (uint64_t done = 0; done < job.bytes;) {
    const uint64_t to = job.destination + done, from = job.source + done;
    const uint64_t n = std::min(
        {job.bytes - done, kBlockSize - to % kBlockSize, kBlockSize - from % kBlockSize});
    if (absl::Status s = device_->ReadHostCopy(HostOffset(from), HostByte(to), n); !s.ok()) {
      Fail(s);
      return;
    }
    done += n;
  }
  progress_.fetch_add(1, std::memory_order_relaxed);
  // A thread stages at the modelled rate, slowed by the threads beside it
  // (CopyStream::StagingTime): real copies here are faster than that.
  PaceUntil(start + throttle_.Dilate(job.modelled));
  if (abort_.load()) return;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = copies_.OnChunkStaged(job.copy, job.chunk, Now()); !s.ok()) Fail(s);
}

void UffdBackend::RunDma(const CopyJob& job) {
  const CopyCommand& copy = job.command;
  // The bytes move while the booked link time runs, as a migration's do;
  // the copy is done when it ends (nothing may touch either buffer before:
  // kernels and host accesses wait for the copy).
  const Nanos lands = throttle_.ReserveDma(
      copy.to_device() ? LinkDirection::kHostToDevice : LinkDirection::kDeviceToHost, copy.size,
      MonotonicNanos());
  const uint64_t end = copy.device_address + copy.size;
  for (uint64_t address = copy.device_address; address < end;) {
    const uint64_t bytes = std::min(end, (BlockOfAddress(address) + 1) * kBlockSize) - address;
    // A block moves once nothing of it is on the link: then no page is
    // half way, and none can start moving while the engine's lock is held.
    for (;;) {
      if (abort_.load()) return;
      {
        absl::MutexLock lock(&mu_);
        const BlockState* state = engine_->memory_state().Find(BlockOfAddress(address));
        if (state == nullptr || state->transfers_in_flight == 0) {
          DmaBlockPart(copy, address, bytes);
          break;
        }
      }
      absl::SleepFor(absl::Microseconds(50));
    }
    address += bytes;
  }
  progress_.fetch_add(1, std::memory_order_relaxed);
  PaceUntil(lands);
  if (abort_.load()) return;
  absl::MutexLock lock(&mu_);
  if (!copy.to_device()) engine_->NoteHostWrote(copy.host_address, copy.size);
  if (absl::Status s = copies_.OnTransfersComplete({&job.dma, 1}, Now()); !s.ok()) Fail(s);
}

void UffdBackend::DmaBlockPart(const CopyCommand& copy, uint64_t first, uint64_t bytes) {
  const BlockNumber block = BlockOfAddress(first);
  const BlockState* state = engine_->memory_state().Find(block);
  const PageMask pages = PageRangeMask(static_cast<int>((first % kBlockSize) / kPageSize),
                                       static_cast<int>(PagesSpanned(first, bytes)));
  if (state != nullptr && (state->in_storage & pages).any()) {
    Fail(absl::FailedPreconditionError(absl::StrFormat(
        "a DMA copy reaches pages of block %#x that the engine keeps in storage, which umlab "
        "does not model; run copies on a device without a storage tier",
        block * kBlockSize)));
    return;
  }
  uint64_t slot = 0;
  FindSlot(block, slot);
  if (copy.to_device()) ZeroFreshEdges(first, bytes);
  const uint64_t end = first + bytes;
  for (uint64_t address = first; address < end;) {
    const int index = static_cast<int>((address % kBlockSize) / kPageSize);
    const uint64_t in_page = address % kPageSize;
    const uint64_t n = std::min(end - address, kPageSize - in_page);
    const bool on_device = MappedOnDevice(slot, index);
    char* page = on_device ? device_->DeviceMemory(slot, index) : device_->HostPage(slot, index);
    uint64_t host = copy.host_address + (address - copy.device_address);
    if (copy.to_device()) {
      for (uint64_t done = 0; done < n;) {
        const uint64_t piece = std::min(n - done, kBlockSize - (host + done) % kBlockSize);
        std::memcpy(page + in_page + done, HostByte(host + done), piece);
        done += piece;
      }
      // Written past the SMs' page table, so past the dirty-bit trap too.
      if (on_device) MarkDirty(slot, index);
    } else {
      // A page with no data yet reads as zeroes, as populated.
      static const char kZeroes[kPageSize] = {};
      const bool no_data = !on_device && state != nullptr && state->invalid.test(index);
      const char* from = no_data ? kZeroes : page + in_page;
      for (uint64_t done = 0; done < n;) {
        const uint64_t piece = std::min(n - done, kBlockSize - (host + done) % kBlockSize);
        if (absl::Status s = device_->WriteHostCopy(HostOffset(host + done), from + done, piece);
            !s.ok()) {
          Fail(s);
          return;
        }
        done += piece;
      }
    }
    address += n;
  }
  // Pages in host memory that held no data hold the copy's now.
  if (copy.to_device()) engine_->NoteHostWrote(first, bytes);
}

// ---------------------------------------------------------------------------
// Host copies.

void UffdBackend::ZeroFreshEdges(uint64_t address, uint64_t size) {
  for (const uint64_t page : {address / kPageSize, (address + size - 1) / kPageSize}) {
    if (address <= page * kPageSize && address + size >= (page + 1) * kPageSize) continue;
    const BlockNumber block = BlockOfPage(page);
    const int index = PageIndexInBlock(page);
    const BlockState* state = engine_->memory_state().Find(block);
    uint64_t slot = 0;
    if (state == nullptr || !state->invalid.test(index) || !FindSlot(block, slot) ||
        MappedOnDevice(slot, index)) {
      continue;
    }
    PageMask mask;
    mask.set(index);
    device_->ZeroHostCopy(slot, mask);
  }
}

uint64_t UffdBackend::HostOffset(uint64_t address) const {
  uint64_t slot = 0;
  FindSlot(BlockOfAddress(address), slot);
  return slot * kBlockSize + address % kBlockSize;
}

char* UffdBackend::HostByte(uint64_t address) const {
  return device_->HostPage(0, 0) + HostOffset(address);
}

uint64_t UffdBackend::DevicePageOf(uint64_t address) const {
  return HostOffset(address) / kPageSize;
}

void UffdBackend::CopyHostBytes(uint64_t to, uint64_t from, uint64_t bytes) const {
  while (bytes > 0) {
    const uint64_t n =
        std::min({bytes, kBlockSize - to % kBlockSize, kBlockSize - from % kBlockSize});
    std::memcpy(HostByte(to), HostByte(from), n);
    to += n;
    from += n;
    bytes -= n;
  }
}

void UffdBackend::ProtectHostRange(uint64_t address, uint64_t size, bool protect) {
  // Whole pages, block by block: a block's slot is contiguous in the host
  // copies, its neighbour's need not be.
  uint64_t first = address / kPageSize * kPageSize;
  const uint64_t end = (address + size + kPageSize - 1) / kPageSize * kPageSize;
  while (first < end) {
    const uint64_t n = std::min(end, (BlockOfAddress(first) + 1) * kBlockSize) - first;
    if (absl::Status s = device_->ProtectHost(HostOffset(first), n, protect); !s.ok()) {
      absl::MutexLock lock(&error_mu_);
      if (error_.ok()) error_ = s;
    }
    first += n;
  }
}

void UffdBackend::LiftAllProtections() {
  absl::MutexLock lock(&protect_mu_);
  protections_lifted_ = true;
  for (const auto& [id, copy] : protected_) ProtectHostRange(copy.host_address, copy.size, false);
  protected_.clear();
}

}  // namespace umlab
