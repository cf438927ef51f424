#include "core/engine.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/block_range.h"

namespace umlab {
namespace {

IterationStats Snapshot(const RunStats& stats) {
  IterationStats s;
  s.faults = stats.faults;
  s.h2d_bytes = stats.h2d_bytes;
  s.d2h_bytes = stats.d2h_bytes;
  s.faulted_pages = stats.faulted_pages;
  s.faulted_in_flight_pages = stats.faulted_in_flight_pages;
  s.prefetch_bytes = stats.prefetch_bytes;
  s.evicted_bytes = stats.evicted_bytes;
  s.stall_ns = stats.stall_ns;
  return s;
}

// Consecutive fruitless batches before the engine declares a deadlock. A
// policy may refuse victims for a while (say, pinned thrashing blocks), so
// one fruitless batch proves nothing.
constexpr int kFruitlessBatchLimit = 1000;

}  // namespace

EngineConfig EngineConfigFor(const DeviceConfig& device) {
  EngineConfig config;
  config.batch_size = device.fault_batch_size;
  config.fault_latency_ns = device.fault_latency_ns;
  config.host_capacity_pages = device.host_memory_bytes / kPageSize;
  config.has_storage = device.link.storage.present;
  return config;
}

Engine::Engine(Backend& backend, Policy& policy, uint64_t capacity_frames,
               const EngineConfig& config)
    : backend_(backend),
      policy_(policy),
      config_(config),
      unlimited_(policy.UnlimitedCapacity()),
      memory_(policy.UnlimitedCapacity() ? kUnlimitedFrames : capacity_frames,
              config.host_capacity_pages, config.has_storage) {
  config_.batch_size = std::max(1, config_.batch_size);
  // A backend that charges fault handling per kernel has it in its own
  // model; a batch latency would charge it twice.
  if (backend.ChargesFaultsPerKernel()) config_.fault_latency_ns = 0;
  raw_batch_.resize(config_.batch_size);
  policy_.Bind(this);
  backend_.SetListener(this);
}

// ---------------------------------------------------------------------------
// Program events.

void Engine::OnProgramEvent(const Event& event) {
  switch (event.kind) {
    case EventKind::kIterationBegin:
      BeginIteration(event.iteration);
      break;
    case EventKind::kAlloc:
    case EventKind::kFree:
    case EventKind::kActivate:
    case EventKind::kDeactivate:
      ApplyAllocatorEvent(event);
      policy_.OnAllocatorEvent(event);
      break;
    case EventKind::kKernelDefine:
      Notify([&](EngineObserver& o) { o.OnKernelDefined(event.exec_id, event.name); });
      return;
    case EventKind::kKernelBegin:
      current_exec_id_ = event.exec_id;
      ++stats_.kernels;
      stats_.ideal_time_ns += event.duration_ns;
      Notify([&](EngineObserver& o) { o.OnKernelBegin(event.exec_id, backend_.Now()); });
      policy_.OnKernelBegin(event.exec_id);
      break;
    case EventKind::kKernelEnd:
      Notify([&](EngineObserver& o) { o.OnKernelEnd(event.exec_id, backend_.Now()); });
      policy_.OnKernelEnd(event.exec_id);
      current_exec_id_ = 0;
      break;
    default:
      return;  // accesses and observed events are the backend's business
  }
  PumpPrefetches();
  EndStep();
}

void Engine::ApplyAllocatorEvent(const Event& event) {
  switch (event.kind) {
    case EventKind::kAlloc:
      // Fresh managed memory has no valid copy anywhere: first touch
      // populates it on the device with no transfer, as UVM does.
      ForEachBlockRange(event.address, event.size, false,
                        [&](BlockNumber number, const PageMask& pages) {
                          BlockState& block = memory_.Get(number);
                          DropRemote(block, pages);
                          memory_.LoseData(block, pages & ~block.resident & ~block.in_flight);
                          ChangePages(block, [&] { block.inactive &= ~pages; });
                        });
      break;
    case EventKind::kFree:
      // The segment goes back to the device: its pages are dropped, no
      // write-back, and an emptied block gives its frame back.
      ForEachBlockRange(event.address, event.size, false,
                        [&](BlockNumber number, const PageMask& pages) {
                          BlockState& block = memory_.Get(number);
                          DropResident(block, pages);
                          ForgetCopyInto(number, pages);
                          if (pages.all()) policy_.OnBlockFreed(number);
                        });
      NoteFreeSpace();
      break;
    case EventKind::kActivate: {
      const std::optional<TensorRole> role = RoleOfActivation(event);
      ForEachBlockRange(event.address, event.size, false,
                        [&](BlockNumber number, const PageMask& pages) {
                          BlockState& block = memory_.Get(number);
                          ChangePages(block, [&] { block.inactive &= ~pages; });
                          roles_.Assign(number, pages, role, block.resident | block.in_flight);
                        });
      break;
    }
    case EventKind::kDeactivate:
      ForEachBlockRange(event.address, event.size, true,
                        [&](BlockNumber number, const PageMask& pages) {
                          BlockState& block = memory_.Get(number);
                          ChangePages(block, [&] { block.inactive |= pages; });
                        });
      break;
    default:
      break;
  }
}

void Engine::DropResident(BlockState& block, const PageMask& pages) {
  const PageMask dropped = block.resident & pages;
  if (dropped.any()) {
    // Prefetched pages touched before they are dropped were worth their
    // copy, as they are when evicted (ask before the device forgets).
    if (const PageMask prefetched = block.prefetched & dropped; prefetched.any()) {
      stats_.prefetch_useful_bytes +=
          MaskBytes(prefetched & backend_.QueryUse(block.number).accessed);
    }
    backend_.Invalidate(block.number, dropped);
    ChangePages(block, [&] { block.resident &= ~dropped; });
    block.prefetched &= ~dropped;
    stats_.invalidated_bytes += MaskBytes(dropped);
    Record(EventKind::kInvalidate, block.number, MaskBytes(dropped), 0);
    Notify([&](EngineObserver& o) {
      o.OnInvalidated(block.number, MaskBytes(dropped), backend_.Now());
    });
  }
  DropRemote(block, pages);
  block.invalid |= pages & ~block.in_flight;
  memory_.ForgetCopies(block, pages);
  if (block.has_frame && block.resident.none() && block.in_flight.none() &&
      block.transfers_in_flight == 0) {
    memory_.ReleaseFrame(block);
  }
}

// ---------------------------------------------------------------------------
// Host kernels.

void Engine::ClaimForHost(uint64_t address, uint64_t size, bool write) {
  ForEachBlockRange(address, size, false, [&](BlockNumber number, const PageMask& pages) {
    HostClaim& claim = host_claims_[number];
    claim.pages |= pages;
    if (write) claim.written |= pages;
    host_unsettled_.insert(number);
  });
  SettleHostClaims();
  EndStep();
}

void Engine::SettleHostClaims() {
  for (auto it = host_unsettled_.begin(); it != host_unsettled_.end();) {
    BlockState& block = memory_.Get(*it);
    const PageMask pages = host_claims_[*it].pages;
    if ((block.in_storage & pages).any()) {
      if (health_.ok()) {
        health_ = absl::FailedPreconditionError(
            "a host kernel touches pages the engine keeps in storage, which umlab does not "
            "model the CPU reaching; run host kernels on a device without a storage tier");
      }
      host_unsettled_.erase(it++);
      continue;
    }
    if (!MoveOffDevice(block, pages)) {
      ++it;
      continue;
    }
    host_unsettled_.erase(it++);
  }
}

bool Engine::MoveOffDevice(BlockState& block, const PageMask& pages) {
  // Pages on their way land first; a block with a transfer in flight
  // keeps its frame and pages until it is done, as a pre-eviction waits.
  if ((block.in_flight & pages).any() || block.transfers_in_flight > 0) return false;
  const PageMask resident = block.resident & pages;
  if (resident.none()) return true;
  const uint64_t written_back = stats_.d2h_bytes;
  EvictPages(block, resident, MemoryTier::kHost);
  stats_.host_writeback_bytes += stats_.d2h_bytes - written_back;
  NoteFreeSpace();
  return false;  // off once the write-back is done
}

void Engine::ReleaseHostClaims() {
  for (const auto& [number, claim] : host_claims_) {
    BlockState& block = memory_.Get(number);
    // What the CPU wrote is the pages' data now, in host memory.
    const PageMask written = claim.written & block.invalid;
    if (written.any()) {
      block.invalid &= ~written;
      memory_.PlaceCopies(block, written, MemoryTier::kHost);
    }
  }
  NoteTierPeaks();
  host_claims_.clear();
  host_unsettled_.clear();
  PumpPrefetches();
  EndStep();
}

void Engine::NoteHostWrote(uint64_t address, uint64_t size) {
  ForEachBlockRange(address, size, false, [&](BlockNumber number, const PageMask& pages) {
    BlockState& block = memory_.Get(number);
    const PageMask written = pages & block.invalid & ~block.resident & ~block.in_flight;
    if (written.none()) return;
    block.invalid &= ~written;
    memory_.PlaceCopies(block, written, MemoryTier::kHost);
  });
  NoteTierPeaks();
  EndStep();
}

// ---------------------------------------------------------------------------
// Hidden copies.

void Engine::AwaitCopy(uint64_t address, uint64_t size) {
  ForEachBlockRange(address, size, false, [&](BlockNumber number, const PageMask& pages) {
    PageMask& awaiting = awaiting_copy_[number];
    if ((awaiting & pages).any() && health_.ok()) {
      health_ = absl::FailedPreconditionError(absl::StrFormat(
          "a hidden copy into %#x starts while pages of block %#x still await another copy; "
          "the backend must hold back a copy whose destination overlaps one under way",
          address, number * kBlockSize));
    }
    awaiting |= pages;
    copy_unsettled_.insert(number);
  });
  SettleCopies();
  EndStep();
}

void Engine::SettleCopies() {
  for (auto it = copy_unsettled_.begin(); it != copy_unsettled_.end();) {
    BlockState& block = memory_.Get(*it);
    const PageMask pages = AwaitingCopy(*it);
    if ((block.in_storage & pages).any()) {
      if (health_.ok()) {
        health_ = absl::FailedPreconditionError(absl::StrFormat(
            "a hidden copy writes pages of block %#x that the engine keeps in storage, which "
            "umlab does not model the host reaching; run copies on a device without a "
            "storage tier",
            *it * kBlockSize));
      }
      it = copy_unsettled_.erase(it);
      continue;
    }
    it = MoveOffDevice(block, pages) ? copy_unsettled_.erase(it) : std::next(it);
  }
}

bool Engine::CopyDestinationOffDevice(uint64_t address, uint64_t size) const {
  bool off = true;
  ForEachBlockRange(address, size, false, [&](BlockNumber number, const PageMask& /*pages*/) {
    off = off && !copy_unsettled_.contains(number);
  });
  return off;
}

PageMask Engine::AwaitingCopy(BlockNumber block) const {
  auto it = awaiting_copy_.find(block);
  return it == awaiting_copy_.end() ? PageMask() : it->second;
}

void Engine::ForgetCopyInto(BlockNumber number, const PageMask& pages) {
  // Faults wait for copies only while kernels run, and the program frees
  // memory between kernels: no batch waits for these pages.
  auto it = awaiting_copy_.find(number);
  if (it == awaiting_copy_.end()) return;
  it->second &= ~pages;
  if (it->second.none()) awaiting_copy_.erase(it);
}

std::optional<TransferId> Engine::LandCopy(BlockNumber number, const PageMask& staged) {
  auto awaiting = awaiting_copy_.find(number);
  const PageMask pages = awaiting == awaiting_copy_.end() ? PageMask() : staged & awaiting->second;
  if (pages.none()) return TransferId{0};  // freed meanwhile: nothing to bring
  BlockState& block = memory_.Get(number);
  std::optional<TransferId> after = ObtainFrame(block, VictimReason::kPrefetch);
  if (!after.has_value()) return std::nullopt;
  awaiting->second &= ~pages;
  if (awaiting->second.none()) awaiting_copy_.erase(awaiting);
  // The staging threads wrote the copy's data into host memory: that is
  // the pages' data now, and the migration copies it.
  block.invalid &= ~pages;
  memory_.PlaceCopies(block, pages, MemoryTier::kHost);
  NoteTierPeaks();
  const TransferId id = IssueMigration(block, pages, pages, TransferKind::kPrefetch, *after,
                                       /*limited=*/false);
  stats_.hidden_copy_bytes += MaskBytes(pages);
  // Faults that waited for these pages wait for this transfer now.
  if (auto waiting = batch_awaits_copy_.find(number); waiting != batch_awaits_copy_.end()) {
    if ((waiting->second & pages).any()) batch_outstanding_.insert(id);
    waiting->second &= ~pages;
    if (waiting->second.none()) batch_awaits_copy_.erase(waiting);
  }
  EndStep();
  return id;
}

void Engine::BeginIteration(uint64_t index) {
  CloseIteration();
  policy_.OnIterationBegin(index);
  Notify([&](EngineObserver& o) { o.OnIterationBegin(index, backend_.Now()); });
  in_iteration_ = true;
  iteration_start_ = Snapshot(stats_);
  iteration_start_ns_ = backend_.Now();
}

void Engine::CloseIteration() {
  if (!in_iteration_) return;
  const IterationStats now = Snapshot(stats_);
  IterationStats it;
  it.faults = now.faults - iteration_start_.faults;
  it.h2d_bytes = now.h2d_bytes - iteration_start_.h2d_bytes;
  it.d2h_bytes = now.d2h_bytes - iteration_start_.d2h_bytes;
  it.faulted_pages = now.faulted_pages - iteration_start_.faulted_pages;
  it.faulted_in_flight_pages =
      now.faulted_in_flight_pages - iteration_start_.faulted_in_flight_pages;
  it.prefetch_bytes = now.prefetch_bytes - iteration_start_.prefetch_bytes;
  it.evicted_bytes = now.evicted_bytes - iteration_start_.evicted_bytes;
  it.stall_ns = now.stall_ns - iteration_start_.stall_ns;
  it.time_ns = backend_.Now() - iteration_start_ns_;
  stats_.per_iteration.push_back(it);
  in_iteration_ = false;
}

void Engine::Finish() {
  // Prefetched pages still resident count as useful if they were touched.
  for (const BlockState& block : memory_.blocks()) {
    if (block.prefetched.none()) continue;
    const PageUse use = backend_.QueryUse(block.number);
    stats_.prefetch_useful_bytes += MaskBytes(block.prefetched & use.accessed);
  }
  CloseIteration();
  stats_.peak_device_bytes = roles_.peak_pages() * kPageSize;
  if (roles_.any_roles()) {
    for (int slot = 0; slot <= kTensorRoleCount; ++slot) {
      stats_.peak_device_bytes_by_role[slot] = roles_.at_peak()[slot] * kPageSize;
    }
  }
  const Nanos now = backend_.Now();
  Notify([&](EngineObserver& o) { o.OnFinish(*this, now); });
}

ResidencyBreakdown Engine::Residency() const {
  ResidencyBreakdown out;
  // Only blocks whose prefetched pages were not all seen accessed need
  // asking: a page once accessed stays so until it leaves the device.
  uint64_t unused_pages = 0;
  for (auto it = unconfirmed_prefetches_.begin(); it != unconfirmed_prefetches_.end();) {
    const BlockState* block = memory_.Find(*it);
    // Inactive pages count as inactive, but may become live again untouched.
    PageMask untouched;
    if (block != nullptr) untouched = block->resident & block->prefetched;
    if (untouched.any()) untouched &= ~backend_.QueryUse(*it).accessed;
    if (untouched.none()) {
      unconfirmed_prefetches_.erase(it++);
      continue;
    }
    if (const PageMask unused = untouched & ~block->inactive; unused.any()) {
      unused_pages += unused.count();
    }
    ++it;
  }
  out.in_flight_bytes = page_totals_.in_flight * kPageSize;
  out.inactive_bytes = page_totals_.inactive_resident * kPageSize;
  out.prefetched_unused_bytes = unused_pages * kPageSize;
  out.resident_bytes =
      (page_totals_.resident - page_totals_.inactive_resident - unused_pages) * kPageSize;
  return out;
}

void Engine::AddObserver(EngineObserver* observer) {
  observers_.push_back(observer);
  if (tracking_pages_) return;
  tracking_pages_ = true;
  page_totals_ = PageTotals{};
  for (const BlockState& block : memory_.blocks()) {
    page_totals_ += CountPages(block);
    if (block.prefetched.any()) unconfirmed_prefetches_.insert(block.number);
  }
}

Engine::PageTotals Engine::CountPages(const BlockState& block) {
  // Counting bits is what this costs: test with any() before counting.
  PageTotals count;
  if (block.resident.any()) count.resident = block.resident.count();
  if (block.in_flight.any()) count.in_flight = block.in_flight.count();
  if (const PageMask inactive = block.resident & block.inactive; inactive.any()) {
    count.inactive_resident = inactive.count();
  }
  return count;
}

// ---------------------------------------------------------------------------
// Fault service.

void Engine::ServiceFaults() {
  if (servicing_) return;
  const size_t count = backend_.FetchFaults(absl::MakeSpan(raw_batch_));
  if (count == 0) {
    if (replay_owed_) {
      replay_owed_ = false;
      backend_.Replay(ReplayPolicy::kOnce, 0, batch_start_ns_ + config_.fault_latency_ns);
    }
    PumpPrefetches();
    EndStep();
    return;
  }
  ServiceBatch(count);
  EndStep();
}

void Engine::ServiceBatch(size_t count) {
  servicing_ = true;
  batch_lacked_frames_ = false;
  batch_issued_ = false;
  batch_start_ns_ = backend_.FetchedBatchInstant();
  ++stats_.fault_batches;
  stats_.faults += count;
  const uint64_t pages_before = stats_.faulted_pages;

  // Preprocess: sort by page (stable on arrival, so the first entry of a
  // page wins), drop duplicates, group by block.
  sorted_batch_.assign(raw_batch_.begin(), raw_batch_.begin() + count);
  std::stable_sort(sorted_batch_.begin(), sorted_batch_.end(),
                   [](const FaultEntry& a, const FaultEntry& b) { return a.page < b.page; });
  faulted_blocks_.clear();
  PageNumber previous = UINT64_MAX;
  for (const FaultEntry& entry : sorted_batch_) {
    const bool duplicate = entry.page == previous;
    previous = entry.page;
    const BlockNumber block = BlockOfPage(entry.page);
    if (faulted_blocks_.empty() || faulted_blocks_.back().block != block) {
      faulted_blocks_.push_back(FaultedBlock{block, PageMask(), PageMask()});
    }
    FaultedBlock& faulted = faulted_blocks_.back();
    const int index = PageIndexInBlock(entry.page);
    if (!duplicate) {
      faulted.pages.set(index);
      ++stats_.faulted_pages;
    }
    if (entry.access != AccessType::kRead) faulted.write_pages.set(index);
  }

  policy_.OnFaultBatch(FaultBatch{batch_start_ns_,
                                  absl::MakeConstSpan(raw_batch_.data(), count),
                                  faulted_blocks_});
  Notify([&](EngineObserver& o) {
    o.OnFaultBatch(batch_start_ns_, count, stats_.faulted_pages - pages_before);
  });
  for (const FaultedBlock& faulted : faulted_blocks_) ServiceBlock(faulted);
  if (!BatchWaiting()) FinishBatch();
}

void Engine::ServiceBlock(const FaultedBlock& faulted) {
  BlockState& block = memory_.Get(faulted.block);
  // Pages on their way already (a prefetch, or an earlier batch): wait for
  // those transfers rather than moving the data twice.
  const PageMask arriving = faulted.pages & block.in_flight;
  if (arriving.any()) {
    stats_.faulted_in_flight_pages += arriving.count();
    for (const auto& [id, inflight] : inflight_) {
      const Transfer& transfer = inflight.transfer;
      if (transfer.block == faulted.block && transfer.kind != TransferKind::kEviction &&
          (transfer.pages & arriving).any()) {
        batch_outstanding_.insert(id);
      }
    }
  }
  // Pages a hidden copy has yet to bring: the copy lands them, and the
  // batch waits for it (a migration now would bring a blank page).
  const PageMask awaited = faulted.pages & ~block.in_flight & AwaitingCopy(faulted.block);
  if (awaited.any()) {
    stats_.faulted_awaiting_copy_pages += awaited.count();
    batch_awaits_copy_[faulted.block] |= awaited;
  }
  PageMask missing = faulted.pages & ~block.resident & ~block.in_flight & ~awaited;
  if (missing.none()) return;
  if (policy_.MapsRemotely()) {
    // A fault the policy answers with a mapping to the host's copy: the
    // accessors find it at the batch's replay.
    const PageMask remote = policy_.MapRemotelyOnFault(faulted.block, missing) & missing;
    if (remote.any()) {
      MapRemote(faulted.block, remote);
      missing &= ~block.remote;
      if (missing.none()) return;
    }
  }

  const PageMask wanted =
      (policy_.ExpandFault(faulted.block, missing) | missing) & ~block.resident &
      ~block.in_flight & ~HostHeld(faulted.block) & ~AwaitingCopy(faulted.block);
  const bool arriving_block = !block.has_frame;
  std::optional<TransferId> after = ObtainFrame(block, VictimReason::kFault);
  if (!after.has_value()) {
    batch_lacked_frames_ = true;  // the accessors fault again after replay
    return;
  }
  const TransferId id = IssueMigration(block, wanted, wanted & ~missing,
                                       TransferKind::kFaultMigration, *after);
  if (arriving_block) stats_.faulted_blocks += 1;
  batch_outstanding_.insert(id);
  batch_issued_ = true;
}

void Engine::FinishBatch() {
  servicing_ = false;
  Notify([&](EngineObserver& o) { o.OnFaultBatchDone(backend_.Now()); });
  // A batch that found no frame, with nothing in flight or queued that could
  // free one, will be followed by the same batch forever.
  const bool fruitless = batch_lacked_frames_ && !batch_issued_ && inflight_.empty() &&
                         pre_evict_queue_.empty();
  fruitless_batches_ = fruitless ? fruitless_batches_ + 1 : 0;
  if (fruitless_batches_ > kFruitlessBatchLimit && health_.ok()) {
    health_ = absl::FailedPreconditionError(absl::StrFormat(
        "deadlock: %d fault batches in a row found no frame and nothing is in flight "
        "(the policy refuses every victim, or the capacity of %d frames is too small)",
        fruitless_batches_, memory_.capacity_frames()));
    return;
  }
  const Nanos not_before = batch_start_ns_ + config_.fault_latency_ns;
  if (config_.replay == ReplayPolicy::kOnce) {
    replay_owed_ = true;
  } else {
    // kBlock has woken each block's accessors already; this catches the
    // accessors whose faults could not be serviced, so they fault again.
    backend_.Replay(ReplayPolicy::kBatch, 0, not_before);
  }
  ServiceFaults();
}

std::optional<TransferId> Engine::ObtainFrame(BlockState& block, VictimReason reason) {
  TransferId after = 0;
  // The block's own data may still be on its way back to the host.
  if (block.last_eviction != 0 && inflight_.contains(block.last_eviction)) {
    after = block.last_eviction;
  }
  if (block.has_frame) return after;
  const bool device_made_room =
      (reason == VictimReason::kFault && backend_.MakesRoomFor(TransferKind::kFaultMigration)) ||
      (reason == VictimReason::kPrefetch && backend_.MakesRoomFor(TransferKind::kPrefetch));
  if (!unlimited_ && memory_.free_frames() == 0 && !device_made_room) {
    std::optional<BlockNumber> victim =
        policy_.ChooseVictim(VictimQuery{reason, block.number});
    BlockState* state = victim.has_value() ? memory_.FindMutable(*victim) : nullptr;
    if (state == nullptr || !state->Evictable() || state->number == block.number) {
      return std::nullopt;
    }
    // Evictions leave in issue order on the device-to-host link, so the
    // newest one we depend on is the last to finish.
    after = std::max(after, EvictBlock(*state));
  }
  memory_.ClaimFrame(block, backend_.Now());
  stats_.peak_used_frames = std::max<uint64_t>(stats_.peak_used_frames,
                                               memory_.used_frames());
  NoteFreeSpace();
  return after;
}

TransferId Engine::EvictBlock(BlockState& victim) {
  return EvictPages(victim, victim.resident, std::nullopt);
}

TransferId Engine::EvictPages(BlockState& victim, PageMask pages,
                              std::optional<MemoryTier> tier) {
  pages &= victim.resident;
  const bool whole = pages == victim.resident;
  const PageMask drop = policy_.PagesToDrop(victim) & pages;
  const PageUse use = backend_.QueryUse(victim.number);
  Transfer transfer;
  transfer.id = next_transfer_id_++;
  transfer.kind = TransferKind::kEviction;
  transfer.block = victim.number;
  transfer.pages = pages;
  // Behind a storage tier migrations move the data (as G10 does), so every
  // page kept is written back; otherwise the host's copy of a clean page is
  // still good.
  transfer.copy = pages & ~drop & (memory_.has_storage() ? pages : use.dirty);
  transfer.drop = drop;
  transfer.not_before = backend_.Now();
  if (memory_.has_storage() && transfer.copy.any() &&
      ((tier.has_value() ? *tier : policy_.EvictTo(victim)) == MemoryTier::kStorage ||
       memory_.HostFull((transfer.copy & ~victim.on_host).count()))) {
    transfer.storage = transfer.copy;
  }

  stats_.invalidated_bytes += MaskBytes(drop);
  stats_.d2h_bytes += transfer.copy_bytes();
  stats_.storage_write_bytes += transfer.storage_bytes();

  memory_.LoseData(victim, drop);
  memory_.PlaceCopies(victim, transfer.copy,
                      transfer.storage.any() ? MemoryTier::kStorage : MemoryTier::kHost);
  NoteTierPeaks();
  victim.transfers_in_flight += 1;
  victim.last_eviction = transfer.id;
  if (whole) {
    ReleaseResidency(victim, use);
  } else {
    ReleasePages(victim, pages, use);
  }
  inflight_.emplace(transfer.id, InFlight{transfer, PageMask()});

  if (drop.any()) {
    Record(EventKind::kInvalidate, victim.number, MaskBytes(drop), 0);
    Notify([&](EngineObserver& o) {
      o.OnInvalidated(victim.number, MaskBytes(drop), backend_.Now());
    });
  }
  Record(EventKind::kEvict, victim.number, transfer.copy_bytes(), 0);
  Notify([&](EngineObserver& o) { o.OnTransferIssued(transfer, backend_.Now()); });
  backend_.Evict(transfer);
  policy_.OnEvicted(victim.number, pages);
  return transfer.id;
}

// `pages` by value: callers pass the block's own resident mask.
void Engine::ReleasePages(BlockState& block, PageMask pages, const PageUse& use) {
  stats_.evictions += 1;
  stats_.evicted_bytes += MaskBytes(block.resident & pages);
  stats_.prefetch_useful_bytes += MaskBytes(block.prefetched & pages & use.accessed);
  ChangePages(block, [&] { block.resident &= ~pages; });
  block.prefetched &= ~pages;
}

void Engine::ReleaseResidency(BlockState& block, const PageUse& use) {
  ReleasePages(block, block.resident, use);
  block.pinned = false;
  memory_.ReleaseFrame(block);
}

void Engine::OnDeviceEvicted(BlockNumber number) {
  BlockState* block = memory_.FindMutable(number);
  // A block the engine is moving, or already gave up, is the engine's own
  // eviction (or an old one) being reported back.
  if (block == nullptr || !block->has_frame || block->transfers_in_flight > 0) return;
  const PageMask pages = block->resident;
  stats_.device_evictions += 1;
  ReleaseResidency(*block, backend_.QueryUse(number));
  // The driver writes back every page it evicts, to the host.
  memory_.PlaceCopies(*block, pages, MemoryTier::kHost);
  NoteTierPeaks();
  Record(EventKind::kEvict, number, MaskBytes(pages), 0);
  Notify([&](EngineObserver& o) { o.OnDeviceEvicted(number, MaskBytes(pages), backend_.Now()); });
  policy_.OnEvicted(number, pages);
  NoteFreeSpace();
  EndStep();
}

void Engine::OnDevicePagesEvicted(BlockNumber number, const PageMask& pages) {
  BlockState* block = memory_.FindMutable(number);
  if (block == nullptr || !block->has_frame) return;
  const PageMask gone = block->resident & pages;
  if (gone.none()) return;
  if (gone == block->resident && block->transfers_in_flight == 0) {
    OnDeviceEvicted(number);
    return;
  }
  // Pages arrived or are arriving since the device chose the block: only
  // the evicted ones go, and the block keeps its frame for the rest.
  stats_.device_evictions += 1;
  ReleasePages(*block, gone, backend_.QueryUse(number));
  memory_.PlaceCopies(*block, gone, MemoryTier::kHost);
  NoteTierPeaks();
  Record(EventKind::kEvict, number, MaskBytes(gone), 0);
  Notify([&](EngineObserver& o) { o.OnDeviceEvicted(number, MaskBytes(gone), backend_.Now()); });
  policy_.OnEvicted(number, gone);
  EndStep();
}

void Engine::OnDevicePagesDiscarded(BlockNumber number, const PageMask& pages) {
  OnDevicePagesEvicted(number, pages);
  if (BlockState* block = memory_.FindMutable(number); block != nullptr) {
    memory_.LoseData(*block, pages & ~block->resident & ~block->in_flight);
  }
}

void Engine::OnDevicePagesArrived(BlockNumber number, const PageMask& pages) {
  BlockState& block = memory_.Get(number);
  const PageMask arrived = pages & ~block.resident & ~block.in_flight;
  if (arrived.none()) return;
  if (!block.has_frame) memory_.ClaimFrame(block, backend_.Now());
  block.invalid &= ~arrived;
  ChangePages(block, [&] { block.resident |= arrived; });
  EndStep();
}

TransferId Engine::IssueMigration(BlockState& block, const PageMask& pages,
                                  const PageMask& prefetched, TransferKind kind,
                                  TransferId after, bool limited) {
  Transfer transfer;
  transfer.id = next_transfer_id_++;
  transfer.kind = kind;
  transfer.block = block.number;
  transfer.pages = pages;
  transfer.copy = pages & ~block.invalid;
  transfer.storage = transfer.copy & block.in_storage;
  // Behind a storage tier the data moves, and the tier it came from is
  // free again (G10's host line counts what is not on the device).
  if (memory_.has_storage()) memory_.ForgetCopies(block, pages);
  transfer.not_before = kind == TransferKind::kFaultMigration
                            ? batch_start_ns_ + config_.fault_latency_ns
                            : backend_.Now();
  transfer.after = after;

  const PageMask copied_prefetch = transfer.copy & prefetched;
  stats_.h2d_bytes += transfer.copy_bytes();
  stats_.storage_read_bytes += transfer.storage_bytes();
  stats_.prefetch_bytes += MaskBytes(copied_prefetch);
  stats_.fault_migrated_bytes += transfer.copy_bytes() - MaskBytes(copied_prefetch);
  stats_.zero_filled_bytes += MaskBytes(pages & block.invalid);

  block.invalid &= ~pages;
  // The device reaches these pages in host memory now; the copy replaces
  // that mapping, which must not outlive the data it points to.
  DropRemote(block, pages);
  ChangePages(block, [&] { block.in_flight |= pages; });
  block.transfers_in_flight += 1;
  memory_.TouchMigrated(block, backend_.Now());
  limited = limited && kind == TransferKind::kPrefetch;
  inflight_.emplace(transfer.id, InFlight{transfer, copied_prefetch, limited});
  if (limited) ++prefetches_in_flight_;

  Record(EventKind::kMigrate, block.number, transfer.copy_bytes(),
         static_cast<uint8_t>(kind == TransferKind::kFaultMigration
                                  ? MigrationCause::kFault
                                  : MigrationCause::kPrefetch));
  Notify([&](EngineObserver& o) { o.OnTransferIssued(transfer, backend_.Now()); });
  backend_.Migrate(transfer);
  return transfer.id;
}

void Engine::OnTransferComplete(TransferId id) {
  auto it = inflight_.find(id);
  if (it == inflight_.end()) return;
  const Transfer transfer = it->second.transfer;
  const PageMask prefetched = it->second.prefetched;
  const bool limited = it->second.limited;
  inflight_.erase(it);
  BlockState& block = memory_.Get(transfer.block);
  block.transfers_in_flight -= 1;
  memory_.NoteMayBeEvictable();
  Notify([&](EngineObserver& o) { o.OnTransferCompleted(transfer, backend_.Now()); });

  if (transfer.kind != TransferKind::kEviction) {
    ChangePages(block, [&] {
      block.in_flight &= ~transfer.pages;
      block.resident |= transfer.pages;
    });
    block.prefetched |= prefetched;
    if (tracking_pages_ && prefetched.any()) unconfirmed_prefetches_.insert(block.number);
    if (limited) --prefetches_in_flight_;
    policy_.OnMigrated(transfer.block, transfer.pages, transfer.kind);
  }
  if (!host_unsettled_.empty()) SettleHostClaims();
  if (!copy_unsettled_.empty()) SettleCopies();
  if (batch_outstanding_.erase(id) > 0) {
    if (config_.replay == ReplayPolicy::kBlock) {
      backend_.Replay(ReplayPolicy::kBlock, transfer.block,
                      batch_start_ns_ + config_.fault_latency_ns);
    }
    if (!BatchWaiting() && servicing_) FinishBatch();
  }
  PumpPrefetches();
  EndStep();
}

// ---------------------------------------------------------------------------
// Prefetch and pre-eviction.

void Engine::Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) {
  if (pages.none()) return;
  ++stats_.prefetch_requests;
  prefetch_queue_.push_back(PrefetchRequest{block, pages, exec_id});
  QueuedPages& queued = queued_prefetch_pages_[block];
  queued.pages |= pages;
  ++queued.requests;
}

void Engine::Populate(BlockNumber block, const PageMask& pages) {
  if (pages.any()) populate_queue_.push_back(PrefetchRequest{block, pages, current_exec_id_});
}

void Engine::CancelPrefetches() {
  prefetch_queue_.clear();
  queued_prefetch_pages_.clear();
}

void Engine::PreEvict(BlockNumber block) {
  pre_evict_queue_.push_back(PreEvictRequest{block, FullPageMask(), std::nullopt});
}

void Engine::PreEvictPages(BlockNumber block, const PageMask& pages, MemoryTier tier) {
  if (pages.any()) pre_evict_queue_.push_back(PreEvictRequest{block, pages, tier});
}

void Engine::Discard(BlockNumber number, const PageMask& pages) {
  BlockState* block = memory_.FindMutable(number);
  if (block == nullptr) return;
  // Only garbage goes; pages on their way keep their data until they land.
  const PageMask garbage = pages & block->inactive & ~block->in_flight;
  if (garbage.none()) return;
  DropResident(*block, garbage);
  NoteFreeSpace();
  EndStep();
}

void Engine::SetPinned(BlockNumber block, bool pinned) {
  memory_.Get(block).pinned = pinned;
  if (!pinned) memory_.NoteMayBeEvictable();
}

void Engine::MapRemote(BlockNumber number, const PageMask& pages) {
  if (!backend_.MapsRemotely()) {
    if (health_.ok()) {
      health_ = absl::FailedPreconditionError(absl::StrFormat(
          "the policy maps pages remotely, which the %s backend cannot do; run it on sim, "
          "uffd or cuda",
          backend_.name()));
    }
    return;
  }
  BlockState& block = memory_.Get(number);
  // Only data in host memory can be reached there.
  // Pages awaiting a copy have no data in host memory yet.
  const PageMask mapped = pages & ~block.resident & ~block.in_flight & ~block.in_storage &
                          ~block.remote & ~AwaitingCopy(number);
  if (mapped.none()) return;
  const PageMask fresh = mapped & block.invalid;
  if (fresh.any()) {
    // First touch through the mapping finds a zeroed host page.
    block.invalid &= ~fresh;
    memory_.PlaceCopies(block, fresh, MemoryTier::kHost);
    NoteTierPeaks();
  }
  block.remote |= mapped;
  stats_.remote_mapped_bytes += MaskBytes(mapped);
  backend_.MapRemote(number, mapped, fresh);
  EndStep();
}

void Engine::UnmapRemote(BlockNumber number, const PageMask& pages) {
  BlockState* block = memory_.FindMutable(number);
  if (block == nullptr) return;
  DropRemote(*block, pages);
  EndStep();
}

void Engine::DropRemote(BlockState& block, const PageMask& pages) {
  const PageMask unmapped = block.remote & pages;
  if (unmapped.none()) return;
  block.remote &= ~unmapped;
  backend_.UnmapRemote(block.number, unmapped);
}

void Engine::PumpPrefetches() {
  while (!pre_evict_queue_.empty()) {
    const PreEvictRequest request = pre_evict_queue_.front();
    pre_evict_queue_.pop_front();
    BlockState* victim = memory_.FindMutable(request.block);
    if (victim == nullptr || !victim->Evictable() || (request.pages & victim->resident).none()) {
      continue;
    }
    EvictPages(*victim, request.pages, request.tier);
    ++stats_.pre_evictions;
    NoteFreeSpace();
  }
  while (!populate_queue_.empty()) {
    const PrefetchRequest request = populate_queue_.front();
    populate_queue_.pop_front();
    IssueAhead(request, /*populate=*/true);
  }
  while (prefetches_in_flight_ < config_.prefetch_inflight_limit &&
         !prefetch_queue_.empty()) {
    const PrefetchRequest request = prefetch_queue_.front();
    prefetch_queue_.pop_front();
    if (auto queued = queued_prefetch_pages_.find(request.block);
        queued != queued_prefetch_pages_.end() && --queued->second.requests == 0) {
      queued_prefetch_pages_.erase(queued);
    }
    IssueAhead(request, /*populate=*/false);
  }
}

void Engine::IssueAhead(const PrefetchRequest& request, bool populate) {
  BlockState& block = memory_.Get(request.block);
  // Pages a host kernel holds stay in host memory until it ends; pages
  // awaiting a copy come with it.
  PageMask pages = request.pages & ~block.resident & ~block.in_flight & ~HostHeld(block.number) &
                   ~AwaitingCopy(block.number);
  if (populate) pages &= block.invalid;
  if (pages.none()) return;
  std::optional<TransferId> after = ObtainFrame(block, VictimReason::kPrefetch);
  if (!after.has_value()) {
    ++stats_.prefetches_dropped;
    return;
  }
  // A populate moves no bytes, so it does not count toward the limit.
  IssueMigration(block, pages, pages, TransferKind::kPrefetch, *after, /*limited=*/!populate);
}

void Engine::NoteTierPeaks() {
  stats_.peak_host_bytes = std::max(stats_.peak_host_bytes, memory_.host_pages() * kPageSize);
  stats_.peak_storage_bytes =
      std::max(stats_.peak_storage_bytes, memory_.storage_pages() * kPageSize);
}

void Engine::NoteFreeSpace() {
  const uint64_t free = memory_.free_frames();
  if (free == last_free_frames_) return;
  last_free_frames_ = free;
  policy_.OnFreeSpaceChanged(free);
}

void Engine::Record(EventKind kind, BlockNumber block, uint64_t bytes, uint8_t cause) {
  if (recorder_ == nullptr) return;
  Event event;
  event.kind = kind;
  event.address = block * kBlockSize;
  event.size = bytes;
  event.cause = cause;
  event.time_ns = backend_.Now();
  recorder_->Record(event);
}

// ---------------------------------------------------------------------------
// Invariants.

absl::Status Engine::CheckInvariants() const {
  uint64_t frames = 0, host_pages = 0, storage_pages = 0, device_pages = 0;
  for (const BlockState& block : memory_.blocks()) {
    if ((block.resident & block.invalid).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x has %d pages both resident and invalid", block.number * kBlockSize,
          (block.resident & block.invalid).count()));
    }
    if ((block.resident & block.in_flight).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x has pages both resident and in flight", block.number * kBlockSize));
    }
    if ((block.resident | block.in_flight).any() && !block.has_frame) {
      return absl::InternalError(absl::StrFormat(
          "block %#x holds pages without a frame", block.number * kBlockSize));
    }
    if ((block.remote & (block.resident | block.in_flight | block.invalid | block.in_storage))
            .any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x maps a page remotely that is on the device, arriving, without data or "
          "in storage",
          block.number * kBlockSize));
    }
    if (!host_unsettled_.contains(block.number) &&
        ((block.resident | block.in_flight) & HostHeld(block.number)).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x has pages on the device that a running host kernel holds",
          block.number * kBlockSize));
    }
    if (!copy_unsettled_.contains(block.number) &&
        ((block.resident | block.in_flight) & AwaitingCopy(block.number)).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x has pages on the device that a hidden copy has yet to land: a kernel "
          "could read them blank",
          block.number * kBlockSize));
    }
    device_pages += (block.resident | block.in_flight).count();
    if ((block.on_host & block.in_storage).any() ||
        ((block.on_host | block.in_storage) & block.invalid).any()) {
      return absl::InternalError(absl::StrFormat(
          "block %#x has a page copied to both tiers, or a copy of a page with no data",
          block.number * kBlockSize));
    }
    host_pages += block.on_host.count();
    storage_pages += block.in_storage.count();
    if (block.has_frame) ++frames;
  }
  if (host_pages != memory_.host_pages() || storage_pages != memory_.storage_pages()) {
    return absl::InternalError(absl::StrFormat(
        "tier totals drifted: %d host and %d storage pages kept, but %d and %d held",
        memory_.host_pages(), memory_.storage_pages(), host_pages, storage_pages));
  }
  if (device_pages != roles_.total_pages()) {
    return absl::InternalError(absl::StrFormat(
        "device pages by role drifted: %d counted, but %d held", roles_.total_pages(),
        device_pages));
  }
  if (frames != memory_.used_frames()) {
    return absl::InternalError(absl::StrFormat("frame count %d, but %d blocks hold frames",
                                               memory_.used_frames(), frames));
  }
  if (!unlimited_ && !backend_.MakesRoomForAnything() && frames > memory_.capacity_frames()) {
    return absl::InternalError(absl::StrFormat(
        "resident frames %d exceed the capacity of %d", frames, memory_.capacity_frames()));
  }
  if (tracking_pages_) {
    PageTotals recount;
    for (const BlockState& block : memory_.blocks()) recount += CountPages(block);
    if (recount.resident != page_totals_.resident || recount.in_flight != page_totals_.in_flight ||
        recount.inactive_resident != page_totals_.inactive_resident) {
      return absl::InternalError(absl::StrFormat(
          "page totals drifted: resident %d, in flight %d, inactive %d kept, but %d, %d, %d held",
          page_totals_.resident, page_totals_.in_flight, page_totals_.inactive_resident,
          recount.resident, recount.in_flight, recount.inactive_resident));
    }
  }
  if (!backend_.CountsItsOwnTraffic() &&
      stats_.h2d_bytes != stats_.fault_migrated_bytes + stats_.prefetch_bytes) {
    return absl::InternalError(absl::StrFormat(
        "bytes not conserved: h2d %d != faulted-in %d + prefetched %d", stats_.h2d_bytes,
        stats_.fault_migrated_bytes, stats_.prefetch_bytes));
  }
  return absl::OkStatus();
}

void Engine::EndStep() {
  if (!observers_.empty()) {
    const Nanos now = backend_.Now();
    Notify([&](EngineObserver& o) { o.OnStep(*this, now); });
  }
  MaybeCheckInvariants();
}

void Engine::MaybeCheckInvariants() {
  if (!config_.check_invariants || !invariant_status_.ok()) return;
  invariant_status_ = CheckInvariants();
}

}  // namespace umlab
