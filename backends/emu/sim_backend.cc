#include "backends/emu/sim_backend.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/backend_registry.h"
#include "core/kernel_assembler.h"

namespace umlab {
namespace {

constexpr int64_t kNeverPicos = std::numeric_limits<int64_t>::max();

}  // namespace

SimBackend::SimBackend(const DeviceConfig& device, uint64_t capacity_frames)
    : device_(device),
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
      engine.OnProgramEvent(assembler.kernel_end());
    }
    if (!error_.ok()) return error_;
    if (!engine.invariant_status().ok()) return engine.invariant_status();
  }
  if (!assembler.status().ok()) return assembler.status();
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
  // below. Each spends compute * issuers / accesses per access, so the
  // kernel takes exactly its compute time when nothing stalls.
  const uint64_t sm_count = std::min<uint64_t>(device_.access_streams(), total);
  const Picos per_access = static_cast<Picos>(
      static_cast<__int128>(compute_ns) * kPicosPerNano * sm_count / total);
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
      auto it = transfers_.find(id);
      if (it == transfers_.end()) continue;
      const Transfer transfer = it->second;
      transfers_.erase(it);
      if (transfer.kind != TransferKind::kEviction) {
        absl::Status mapped =
            device_memory_.Map(transfer.block, transfer.pages, transfer.pages & ~transfer.copy);
        if (!mapped.ok() && error_.ok()) error_ = mapped;
      }
      listener_->OnTransferComplete(id);
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
  link_.Submit(LinkTransfer{transfer.id, LinkDirection::kHostToDevice, transfer.kind,
                            transfer.copy_bytes(), transfer.not_before, transfer.after},
               clock_.now());
}

void SimBackend::Evict(const Transfer& transfer) {
  device_memory_.Unmap(transfer.block, transfer.pages);
  transfers_.emplace(transfer.id, transfer);
  link_.Submit(LinkTransfer{transfer.id, LinkDirection::kDeviceToHost, transfer.kind,
                            transfer.copy_bytes(), transfer.not_before, transfer.after},
               clock_.now());
}

void SimBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  device_memory_.Unmap(block, pages);
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
          {},
          [](const ParamMap&, const DeviceConfig& device,
             uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
            return std::make_unique<SimBackend>(device, capacity_frames);
          },
          // Virtual time and nothing global: runs may share the process.
          {.parallel_runs = true}});

}  // namespace umlab
