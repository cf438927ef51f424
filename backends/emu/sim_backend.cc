#include "backends/emu/sim_backend.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/access_pace.h"
#include "core/backend_registry.h"
#include "core/kernel_assembler.h"

namespace umlab {
namespace {

constexpr int64_t kNeverPicos = std::numeric_limits<int64_t>::max();

}  // namespace

SimBackend::SimBackend(const DeviceConfig& device, uint64_t capacity_frames,
                       const SimOptions& options)
    : device_(device),
      options_(options),
      device_memory_(capacity_frames),
      fault_buffer_(static_cast<size_t>(device.fault_buffer_entries)),
      link_(device.link) {}

absl::Status SimBackend::Run(EventSource& program, Engine& engine, EventSink* recorder) {
  engine_ = &engine;
  recorder_ = recorder;
  KernelAssembler assembler(program);
  while (assembler.Next()) {
    if (!assembler.is_kernel()) {
      if (recorder_ != nullptr) recorder_->Record(assembler.event());
      engine.OnProgramEvent(assembler.event());
    } else {
      if (recorder_ != nullptr) {
        for (const Event& event : assembler.kernel_events()) recorder_->Record(event);
      }
      ranges_.clear();
      for (const Event& access : assembler.accesses()) {
        if (access.size == 0) continue;
        ranges_.push_back(AccessRange{PageOfAddress(access.address),
                                      PagesSpanned(access.address, access.size),
                                      access.access != AccessType::kRead});
      }
      const Event& begin = assembler.kernel_begin();
      if (absl::Status s = AdvanceIdle(clock_.now() + device_.kernel_launch_ns); !s.ok()) {
        return s;
      }
      engine.mutable_stats().launch_ns += device_.kernel_launch_ns;
      engine.OnProgramEvent(begin);
      if (absl::Status s = ExecuteKernel(begin.exec_id, begin.duration_ns); !s.ok()) return s;
      // The grid winds down (its start-up is counted here too: nothing of
      // the kernel's faults depends on where in the kernel it falls).
      if (absl::Status s = AdvanceIdle(clock_.now() + device_.kernel_grid_ns); !s.ok()) {
        return s;
      }
      engine.OnProgramEvent(assembler.kernel_end());
    }
    if (!error_.ok()) return error_;
    if (!engine.invariant_status().ok()) return engine.invariant_status();
  }
  if (!assembler.status().ok()) return assembler.status();
  // As the cuda backend drains CUPTI at the end: every eviction the driver
  // made is known before the books close.
  while (!unreported_.empty()) ReportDeviceEvictions(unreported_.begin()->first);
  engine.Finish();
  RunStats& stats = engine.mutable_stats();
  stats.time_ns = clock_.now();
  stats.dropped_faults = fault_buffer_.dropped();
  return error_;
}

absl::Status SimBackend::ExecuteKernel(uint32_t exec_id, Nanos compute_ns) {
  uint64_t total = 0;
  for (const AccessRange& range : ranges_) total += range.pages;
  if (total == 0) return AdvanceIdle(clock_.now() + compute_ns);

  // One issuer per warp (DeviceConfig::warps_per_sm); they are the "SMs"
  // below, paced as on every backend (core/access_pace.h).
  const AccessPace pace = PaceOf(compute_ns, total, device_.access_streams());
  const uint64_t sm_count = pace.issuers;
  const Picos per_access = pace.step_ps;
  const Picos start = clock_.now() * kPicosPerNano;
  exec_id_ = exec_id;
  range_index_ = 0;
  range_offset_ = 0;
  sms_.assign(sm_count, Sm{});
  stalled_.clear();
  ready_.Reset(sm_count);
  for (uint32_t sm = 0; sm < sm_count; ++sm) ready_.PushAfterAccess(start, sm);
  Picos finish = start;
  RunStats& stats = engine_->mutable_stats();

  // The next system event only moves when one is processed or an SM faults
  // (which may request a fault service), so it is recomputed only then
  // rather than on every access.
  Nanos next_system = NextSystemEventTime();
  while (!ready_.empty() || !stalled_.empty()) {
    const Picos next_sm = ready_.empty() ? kNeverPicos : ready_.top().first;
    // Ties go to the SMs, so faults raised at one instant share a batch.
    if (next_system != kNever && next_system * kPicosPerNano < next_sm) {
      ProcessSystemEventAtOrBefore(next_system);
      if (!error_.ok()) return error_;
      if (!engine_->health().ok()) return engine_->health();
      next_system = NextSystemEventTime();
      continue;
    }
    if (ready_.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "deadlock in kernel %d: %d SMs wait on faults that cannot be serviced "
          "(the policy refused every victim, or the capacity of %d frames is too small)",
          exec_id, stalled_.size(), device_memory_.capacity_frames()));
    }
    const auto [time, sm_index] = ready_.top();
    ready_.pop();
    clock_.AdvanceTo(time / kPicosPerNano);
    Sm& sm = sms_[sm_index];
    if (sm.retry) {
      sm.retry = false;
      if (device_memory_.Access(sm.page, sm.write)) {
        ++stats.page_accesses;
        ready_.PushAfterAccess(time + per_access, sm_index);
      } else {
        Fault(sm_index, sm.page, sm.write, time);
        next_system = NextSystemEventTime();
      }
      continue;
    }
    if (range_index_ == ranges_.size()) {
      finish = std::max(finish, time);  // this SM has no work left
      continue;
    }
    const AccessRange& range = ranges_[range_index_];
    const PageNumber page = range.first_page + range_offset_;
    const bool write = range.write;
    const uint64_t mapped = device_memory_.MappedRun(page, range.pages - range_offset_);
    if (mapped == 0) {
      AdvanceCursor(1);
      Fault(sm_index, page, write, time);
      next_system = NextSystemEventTime();
      continue;
    }
    // Hits need no service, so the SMs take the mapped pages one each, in
    // the same time order as one at a time, until the run ends or a woken
    // SM or a system event comes first.
    const Picos limit = next_system == kNever ? kNeverPicos : next_system * kPicosPerNano;
    ready_.PushAfterAccess(time + per_access, sm_index);
    Picos last = time;
    uint64_t taken = 1;
    while (taken < mapped && ready_.RunningNextAtOrBefore(limit)) {
      const ReadySm next = ready_.top();
      ready_.pop();
      last = next.first;
      ready_.PushAfterAccess(next.first + per_access, next.second);
      ++taken;
    }
    device_memory_.RecordAccesses(page, taken, write);
    stats.page_accesses += taken;
    clock_.AdvanceTo(last / kPicosPerNano);
    AdvanceCursor(taken);
  }
  clock_.AdvanceTo((finish + kPicosPerNano - 1) / kPicosPerNano);
  return error_;
}

void SimBackend::AdvanceCursor(uint64_t pages) {
  range_offset_ += pages;
  if (range_offset_ == ranges_[range_index_].pages) {
    ++range_index_;
    range_offset_ = 0;
  }
}

void SimBackend::Fault(uint32_t sm_index, PageNumber page, bool write, Picos now) {
  Sm& sm = sms_[sm_index];
  sm.page = page;
  sm.write = write;
  sm.stalled_since = now;
  stalled_.push_back(sm_index);
  FaultEntry entry{page, write ? AccessType::kWrite : AccessType::kRead, sm_index, exec_id_,
                   now / kPicosPerNano};
  if (fault_buffer_.Push(entry) && recorder_ != nullptr) recorder_->Record(FaultEvent(entry));
  if (options_.policy_from_user) {
    // The driver services this fault itself; whatever it evicted of the
    // block is old news by then.
    ReportDeviceEvictions(BlockOfPage(page));
    if (pending_per_block_.contains(BlockOfPage(page))) {
      ServiceQueuedPrefetch(page, now / kPicosPerNano);
    }
  }
  // The engine fetches once every SM that faults at this instant has done
  // so: at the next whole nanosecond, after the SM events before it.
  if (!engine_->servicing() && !service_requested_) {
    service_requested_ = true;
    service_time_ = (now + kPicosPerNano - 1) / kPicosPerNano;
  }
}

Nanos SimBackend::NextSystemEventTime() const {
  Nanos next = link_.NextEventTime();
  if (!replays_.empty()) next = std::min(next, replays_.top().time);
  if (service_requested_) next = std::min(next, std::max(clock_.now(), service_time_));
  return next;
}

bool SimBackend::ProcessSystemEventAtOrBefore(Nanos until) {
  const Nanos time = NextSystemEventTime();
  if (time == kNever || time > until) return false;
  clock_.AdvanceTo(time);
  // At one instant: land transfers first, then replay, then fetch faults.
  if (link_.NextEventTime() <= clock_.now()) {
    completed_scratch_.clear();
    link_.ProcessEventsAt(clock_.now(), completed_scratch_);
    for (TransferId id : completed_scratch_) {
      if (auto evicted = device_evictions_.find(id); evicted != device_evictions_.end()) {
        // The driver's own eviction: the engine hears of it as the cuda
        // backend does, from the transfer's record, once the copy is done.
        const BlockNumber victim = evicted->second;
        device_evictions_.erase(evicted);
        ReportDeviceEviction(victim, id);
        continue;
      }
      auto it = transfers_.find(id);
      if (it == transfers_.end()) continue;
      const Transfer transfer = it->second;
      transfers_.erase(it);
      if (transfer.kind != TransferKind::kEviction) {
        absl::Status mapped =
            device_memory_.Map(transfer.block, transfer.pages, transfer.pages & ~transfer.copy);
        if (!mapped.ok() && error_.ok()) error_ = mapped;
        arriving_.erase(transfer.block);  // it holds a frame now
      }
      if (options_.policy_from_user) {
        auto pending = pending_per_block_.find(transfer.block);
        if (pending != pending_per_block_.end() && --pending->second == 0) {
          pending_per_block_.erase(pending);
        }
      }
      listener_->OnTransferComplete(id);
      if (id == call_running_) {
        call_running_ = 0;
        IssueNextCall();
      }
    }
    if (!waiting_for_room_.empty() && !completed_scratch_.empty()) {
      std::deque<Transfer> waiting;
      waiting.swap(waiting_for_room_);
      for (const Transfer& transfer : waiting) Submit(transfer);
    }
    return true;
  }
  if (!replays_.empty() && replays_.top().time <= clock_.now()) {
    const ReplayEvent replay = replays_.top();
    replays_.pop();
    ApplyReplay(replay);
    return true;
  }
  if (service_requested_ && service_time_ <= clock_.now()) {
    service_requested_ = false;
    engine_->ServiceFaults();
  }
  return true;
}

void SimBackend::ApplyReplay(const ReplayEvent& replay) {
  if (replay.policy != ReplayPolicy::kBlock) fault_buffer_.Flush();
  const Picos now = clock_.now() * kPicosPerNano;
  // Most woken SMs resume exactly now, and those must go in SM order; SM
  // indices are dense, so a pass over the SMs orders them without a sort.
  // Only SMs that faulted within the current nanosecond resume later.
  woken_later_.clear();
  bool any_now = false;
  size_t kept = 0;
  for (uint32_t sm_index : stalled_) {
    Sm& sm = sms_[sm_index];
    if (replay.policy == ReplayPolicy::kBlock && BlockOfPage(sm.page) != replay.block) {
      stalled_[kept++] = sm_index;
      continue;
    }
    const Picos resume = std::max(now, sm.stalled_since);
    stall_picos_ += resume - sm.stalled_since;
    sm.retry = true;
    if (resume == now) {
      sm.wakes_now = true;
      any_now = true;
    } else {
      woken_later_.emplace_back(resume, sm_index);
    }
  }
  stalled_.resize(kept);
  woken_scratch_.clear();
  for (uint32_t sm_index = 0; any_now && sm_index < sms_.size(); ++sm_index) {
    if (sms_[sm_index].wakes_now) {
      sms_[sm_index].wakes_now = false;
      woken_scratch_.emplace_back(now, sm_index);
    }
  }
  std::sort(woken_later_.begin(), woken_later_.end());
  woken_scratch_.insert(woken_scratch_.end(), woken_later_.begin(), woken_later_.end());
  ready_.PushWoken(woken_scratch_);
  engine_->mutable_stats().stall_ns =
      stall_picos_ / kPicosPerNano / std::max(1, device_.access_streams());
}

absl::Status SimBackend::AdvanceIdle(Nanos until) {
  while (ProcessSystemEventAtOrBefore(until)) {
    if (!error_.ok()) return error_;
  }
  clock_.AdvanceTo(until);
  return error_;
}

size_t SimBackend::FetchFaults(absl::Span<FaultEntry> out) {
  return fault_buffer_.Fetch(out);
}

void SimBackend::Migrate(const Transfer& transfer) {
  transfers_.emplace(transfer.id, transfer);
  if (!options_.policy_from_user) {
    Submit(transfer);
    return;
  }
  ++pending_per_block_[transfer.block];
  if (transfer.kind == TransferKind::kPrefetch) {
    calls_.push_back(transfer);
    IssueNextCall();
  } else {
    Submit(transfer);  // the driver's own fault service
  }
}

void SimBackend::Evict(const Transfer& transfer) {
  transfers_.emplace(transfer.id, transfer);
  if (!options_.policy_from_user) {
    Submit(transfer);
    return;
  }
  // Every engine eviction in user mode is a policy's pre-eviction: a call.
  ++pending_per_block_[transfer.block];
  ++queued_evictions_[transfer.block];
  calls_.push_back(transfer);
  IssueNextCall();
}

void SimBackend::IssueNextCall() {
  if (call_running_ != 0 || calls_.empty()) return;
  Transfer call = calls_.front();
  calls_.pop_front();
  if (call.kind == TransferKind::kEviction) ForgetQueuedEviction(call.block);
  call_running_ = call.id;
  call.not_before = std::max(call.not_before, clock_.now());
  Submit(call);
}

void SimBackend::ServiceQueuedPrefetch(PageNumber page, Nanos now) {
  const BlockNumber block = BlockOfPage(page);
  const int index = PageIndexInBlock(page);
  for (auto it = calls_.begin(); it != calls_.end(); ++it) {
    if (it->kind != TransferKind::kPrefetch || it->block != block || !it->pages.test(index)) {
      continue;
    }
    // The driver services the fault itself: it moves the pages now, through
    // its fault path, and the policy's call finds them there when its turn
    // comes (the engine still waits for this transfer, as it waited for the
    // call's).
    Transfer transfer = *it;
    calls_.erase(it);
    transfer.not_before = std::max(transfer.not_before, now + device_.fault_latency_ns);
    Submit(transfer);
    return;
  }
}

void SimBackend::Submit(const Transfer& transfer) {
  const bool eviction = transfer.kind == TransferKind::kEviction;
  TransferId after = transfer.after;
  uint64_t bytes = transfer.copy_bytes();
  if (eviction) {
    if (options_.policy_from_user) {
      // A pre-eviction the driver overtook, before the engine heard of it,
      // finds only what the device still holds.
      const uint64_t held = MaskBytes(transfer.copy & device_memory_.Mapped(transfer.block));
      RunStats& stats = engine_->mutable_stats();
      stats.d2h_bytes -= std::min(stats.d2h_bytes, bytes - held);
      bytes = held;
    }
    device_memory_.Unmap(transfer.block, transfer.pages);
    ForgetIfUnmapped(transfer.block);
  } else if (options_.policy_from_user) {
    // A pre-eviction still queued for this block was decided about pages
    // it held before; pages arriving now are not what it meant to evict.
    if (queued_evictions_.contains(transfer.block)) {
      RunStats& stats = engine_->mutable_stats();
      for (Transfer& call : calls_) {
        if (call.kind != TransferKind::kEviction || call.block != transfer.block) continue;
        stats.d2h_bytes -= std::min(stats.d2h_bytes, MaskBytes(call.copy & transfer.pages));
        call.pages &= ~transfer.pages;
        call.copy &= ~transfer.pages;
      }
    }
    const bool needs_frame =
        device_memory_.Mapped(transfer.block).none() && !arriving_.contains(transfer.block);
    if (needs_frame) {
      if (device_memory_.used_frames() + arriving_.size() >= device_memory_.capacity_frames()) {
        // The driver evicts before it copies in; one lane in issue order,
        // so the eviction is the newest thing this arrival depends on.
        const TransferId room = EvictForRoom(transfer.block);
        if (room == 0) {
          // Every block on the device has a transfer pending: wait for one.
          waiting_for_room_.push_back(transfer);
          return;
        }
        after = room;
      }
      arriving_.insert(transfer.block);
    }
    NoteArrival(transfer.block);
  }
  // User mode: the driver does one thing at a time in the order it was
  // asked; faults have no priority over calls.
  const TransferKind priority =
      options_.policy_from_user ? TransferKind::kFaultMigration : transfer.kind;
  link_.Submit(LinkTransfer{transfer.id,
                            eviction ? LinkDirection::kDeviceToHost : LinkDirection::kHostToDevice,
                            priority, bytes, transfer.not_before, after},
               clock_.now());
}

TransferId SimBackend::EvictForRoom(BlockNumber arriving) {
  for (auto it = arrival_order_.begin(); it != arrival_order_.end(); ++it) {
    const BlockNumber victim = it->second;
    if (victim == arriving) continue;
    // The driver knows nothing of calls still queued on the host, so a
    // block whose only pending work is a queued pre-eviction is fair game;
    // one with a copy under way, or a queued prefetch the engine counts as
    // resident soon, is not.
    auto pending = pending_per_block_.find(victim);
    if (pending != pending_per_block_.end()) {
      auto queued = queued_evictions_.find(victim);
      if (queued == queued_evictions_.end() || queued->second != pending->second) continue;
      VoidQueuedEvictions(victim);
    }
    const PageMask pages = device_memory_.Mapped(victim);
    arrival_of_.erase(victim);
    arrival_order_.erase(it);
    device_memory_.Unmap(victim, pages);
    const TransferId id = next_device_transfer_++;
    device_evictions_.emplace(id, victim);
    unreported_[victim].push_back({id, pages});
    engine_->mutable_stats().d2h_bytes += MaskBytes(pages);
    link_.Submit(LinkTransfer{id, LinkDirection::kDeviceToHost, TransferKind::kFaultMigration,
                              MaskBytes(pages), clock_.now(), 0},
                 clock_.now());
    return id;
  }
  return 0;
}

void SimBackend::ForgetQueuedEviction(BlockNumber block) {
  auto it = queued_evictions_.find(block);
  if (it != queued_evictions_.end() && --it->second == 0) queued_evictions_.erase(it);
}

void SimBackend::VoidQueuedEvictions(BlockNumber block) {
  for (auto it = calls_.begin(); it != calls_.end();) {
    if (it->kind != TransferKind::kEviction || it->block != block) {
      ++it;
      continue;
    }
    // The driver evicted the block (writing back every page) before the
    // policy's call came: the call finds nothing on the device and moves
    // nothing, so the bytes the engine booked for it never cross.
    RunStats& stats = engine_->mutable_stats();
    stats.d2h_bytes -= std::min(stats.d2h_bytes, it->copy_bytes());
    link_.Submit(LinkTransfer{it->id, LinkDirection::kDeviceToHost, TransferKind::kFaultMigration,
                              0, clock_.now(), 0},
                 clock_.now());
    ForgetQueuedEviction(block);
    it = calls_.erase(it);
  }
}

void SimBackend::ReportDeviceEviction(BlockNumber block, TransferId id) {
  auto it = unreported_.find(block);
  if (it == unreported_.end()) return;
  std::vector<UnreportedEviction>& evictions = it->second;
  auto position = std::find_if(evictions.begin(), evictions.end(),
                               [id](const UnreportedEviction& e) { return e.id == id; });
  if (position == evictions.end()) return;  // reported already
  const PageMask pages = position->pages;
  evictions.erase(position);
  if (evictions.empty()) unreported_.erase(it);
  engine_->OnDevicePagesEvicted(block, pages);
}

void SimBackend::ReportDeviceEvictions(BlockNumber block) {
  auto it = unreported_.find(block);
  if (it == unreported_.end()) return;
  const std::vector<UnreportedEviction> evictions = std::move(it->second);
  unreported_.erase(it);
  for (const UnreportedEviction& eviction : evictions) {
    engine_->OnDevicePagesEvicted(block, eviction.pages);
  }
}

void SimBackend::NoteArrival(BlockNumber block) {
  auto [it, inserted] = arrival_of_.try_emplace(block, next_arrival_);
  if (!inserted) {
    arrival_order_.erase(it->second);
    it->second = next_arrival_;
  }
  arrival_order_.emplace(next_arrival_++, block);
}

void SimBackend::ForgetIfUnmapped(BlockNumber block) {
  if (!options_.policy_from_user || device_memory_.Mapped(block).any() ||
      arriving_.contains(block)) {
    return;
  }
  auto it = arrival_of_.find(block);
  if (it == arrival_of_.end()) return;
  arrival_order_.erase(it->second);
  arrival_of_.erase(it);
}

void SimBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  device_memory_.Unmap(block, pages);
  ForgetIfUnmapped(block);
}

PageUse SimBackend::QueryUse(BlockNumber block) const {
  PageUse use = device_memory_.Use(block);
  // The driver keeps no dirty bits: it writes back whatever it holds.
  if (options_.policy_from_user) use.dirty = device_memory_.Mapped(block);
  return use;
}

void SimBackend::Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) {
  const ReplayEvent replay{std::max(clock_.now(), not_before), replay_sequence_++, policy,
                           block};
  // A replay that is due now happens before the engine fetches again, so a
  // flush discards exactly the entries the replay will regenerate.
  if (replay.time == clock_.now()) {
    ApplyReplay(replay);
  } else {
    replays_.push(replay);
  }
}

absl::Status SimBackend::CheckConsistency(const Engine& engine) const {
  for (const BlockState& block : engine.memory_state().blocks()) {
    // User mode: a policy call still queued when the program ended has not
    // reached the device (nor has what waits for room).
    if (pending_per_block_.contains(block.number)) continue;
    const PageMask mapped = device_memory_.Mapped(block.number);
    if (mapped != block.resident) {
      return absl::InternalError(absl::StrFormat(
          "block %#x: the device maps %d pages but the engine records %d resident",
          block.number * kBlockSize, mapped.count(), block.resident.count()));
    }
  }
  if (device_memory_.used_frames() > device_memory_.capacity_frames()) {
    return absl::InternalError("device frames exceed capacity");
  }
  return absl::OkStatus();
}

}  // namespace umlab

namespace umlab {

UMLAB_REGISTER_BACKEND(
    sim, {"sim", "deterministic virtual time over the device model (no GPU, no real faults)",
          {{"policy_from", ParamType::kString, "driver",
            "where the policy acts: driver (inside the driver's fault handler, as DeepUM's "
            "kernel module) or user (from user space over an unmodified driver that makes room "
            "with its own oldest-arrival victim and full write-back, the policy's calls one at a "
            "time in order: what --backend=cuda:memory=driver runs)",
            {},
            {"driver", "user"}}},
          [](const ParamMap& params, const DeviceConfig& device,
             uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
            SimOptions options;
            options.policy_from_user = params.Choice("policy_from") == 1;
            return std::make_unique<SimBackend>(device, capacity_frames, options);
          },
          // Virtual time and nothing global: runs may share the process.
          {.parallel_runs = true}});

}  // namespace umlab
