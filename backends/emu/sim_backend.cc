#include "backends/emu/sim_backend.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/access_pace.h"
#include "core/backend_registry.h"
#include "core/copy_command.h"
#include "core/kernel_assembler.h"
#include "core/policy.h"

namespace umlab {
namespace {

constexpr int64_t kNeverPicos = std::numeric_limits<int64_t>::max();

// How many bytes one CUPTI transfer record covers, on average, by its
// cause: the driver's fault-path copies come as one record per contiguous
// run of pages (7.8 KB for the faulted pages, 24 KB for what its prefetcher
// adds around them), its evictions as 2.6 records per 2 MiB block, the
// policy's calls as 1.4 (prefetches) and 1.0 (pre-evictions). Measured on
// the H200 in CUPTI's records of mobilenet under deepum at 0.75
// (docs/fidelity.md, "CUPTI's buffers").
constexpr uint64_t kFaultCopyBytesPerRecord = 16 << 10;
constexpr uint64_t kEvictionBytesPerRecord = 800 << 10;
constexpr uint64_t kCallBytesPerRecord = 1536 << 10;
// sizeof(CUpti_ActivityUnifiedMemoryCounter3): a 64 KiB buffer holds 630.
constexpr uint64_t kCuptiRecordBytes = 104;

}  // namespace

// What the driver's engine sees of the device: the fault buffer, the link
// for its fault migrations, the page table, the replays. It never evicts
// (the device makes room), and the run's engine's allocator frees already
// unmap what they drop.
class SimBackend::DriverPort final : public Backend {
 public:
  explicit DriverPort(SimBackend& device) : device_(device) {}
  std::string name() const override { return "sim-driver"; }
  absl::Status Run(EventSource&, Engine&, EventSink*) override {
    return absl::InternalError("the driver port does not run programs");
  }
  void SetListener(TransferListener* /*listener*/) override {}
  size_t FetchFaults(absl::Span<FaultEntry> out) override {
    const size_t count = device_.FetchFromFaultBuffer(out);
    if (count > 0) device_.RecordFaultBatch(out.first(count));
    return count;
  }
  void Migrate(const Transfer& transfer) override { device_.SubmitDriverMigration(transfer); }
  void Evict(const Transfer& /*transfer*/) override {}
  void Invalidate(BlockNumber /*block*/, const PageMask& /*pages*/) override {}
  PageUse QueryUse(BlockNumber block) const override { return device_.QueryUse(block); }
  bool MakesRoomFor(TransferKind /*arrival*/) const override { return true; }
  void Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) override {
    device_.ScheduleReplay(policy, block, not_before);
  }
  Nanos Now() const override { return device_.clock_.now(); }

 private:
  SimBackend& device_;
};

SimBackend::~SimBackend() = default;

SimBackend::SimBackend(const DeviceConfig& device, uint64_t capacity_frames,
                       const SimOptions& options)
    : device_(device),
      options_(options),
      device_memory_(capacity_frames),
      fault_buffer_(static_cast<size_t>(device.fault_buffer_entries)),
      fault_writes_(device.fault_write_ns),
      link_(device.link),
      copies_(device_, link_),
      records_(options.cupti),
      queue_records_(CuptiRecordStreamConfig{/*collect_period_ns=*/0,
                                             /*flush_pause_ns=*/options.poll_ns,
                                             /*flush_cost_ns=*/0, /*buffer_records=*/0}) {}

absl::Status SimBackend::Run(EventSource& program, Engine& engine, EventSink* recorder) {
  engine_ = &engine;
  recorder_ = recorder;
  copies_.Bind(&engine);
  if (options_.policy_from_user) {
    // The driver's own heuristics, as the policy that models them.
    absl::StatusOr<std::unique_ptr<Policy>> heuristics = Policies().Create(options_.driver_policy);
    if (!heuristics.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sim: driver=%s: %s", options_.driver_policy, heuristics.status().message()));
    }
    driver_policy_ = std::move(*heuristics);
    driver_port_ = std::make_unique<DriverPort>(*this);
    driver_ = std::make_unique<Engine>(*driver_port_, *driver_policy_, engine.capacity_frames(),
                                       engine.config());
  }
  // Both engines follow the program; only the run's engine records.
  auto program_event = [&](const Event& event) {
    if (driver_ != nullptr && event.kind == EventKind::kIterationBegin) {
      iteration_marks_.push_back({moved_h2d_bytes_, moved_d2h_bytes_, raised_faults_});
    }
    engine.OnProgramEvent(event);
    if (driver_ != nullptr) driver_->OnProgramEvent(event);
  };
  const bool g10_faults = options_.g10_faults();
  KernelAssembler assembler(program);
  while (assembler.Next()) {
    if (!assembler.is_kernel()) {
      if (recorder_ != nullptr) recorder_->Record(assembler.event());
      if (assembler.event().kind == EventKind::kKernelFaultTimes) {
        fault_times_[assembler.event().exec_id] = {assembler.event().duration_ns,
                                                   assembler.event().time_ns};
      }
      if (assembler.event().kind == EventKind::kCopy) {
        if (absl::Status s = RunCopy(assembler.event()); !s.ok()) return s;
      }
      if (assembler.event().kind == EventKind::kSync) {
        if (absl::Status s = WaitForCopies([&] { return copies_.AllDone(); }, "a sync");
            !s.ok()) {
          return s;
        }
      }
      program_event(assembler.event());
    } else {
      if (recorder_ != nullptr) {
        for (const Event& event : assembler.kernel_events()) recorder_->Record(event);
      }
      ranges_.clear();
      for (const Event& access : assembler.accesses()) {
        if (access.size == 0) continue;
        ranges_.push_back(
            AccessRange{AccessSpan::Of(access.address, access.size, access.rereads),
                        access.access != AccessType::kRead});
      }
      const Event& begin = assembler.kernel_begin();
      if (assembler.kernel_on_host()) {
        if (absl::Status s = ExecuteHostKernel(assembler, program_event); !s.ok()) return s;
        continue;
      }
      if (absl::Status s = AwaitLaunch(begin.exec_id, assembler.accesses()); !s.ok()) return s;
      if (absl::Status s = AdvanceIdle(clock_.now() + device_.kernel_launch_ns); !s.ok()) {
        return s;
      }
      engine.mutable_stats().launch_ns += device_.kernel_launch_ns;
      if (absl::Status s = copies_.CheckNoBlankPages(device_memory_); !s.ok()) return s;
      program_event(begin);
      if (absl::Status s = g10_faults ? ExecuteKernelG10(begin.exec_id, begin.duration_ns)
                                      : ExecuteKernel(begin.exec_id, begin.duration_ns);
          !s.ok()) {
        return s;
      }
      // The grid winds down (its start-up is counted here too: nothing of
      // the kernel's faults depends on where in the kernel it falls).
      if (absl::Status s = AdvanceIdle(clock_.now() + device_.kernel_grid_ns); !s.ok()) {
        return s;
      }
      program_event(assembler.kernel_end());
    }
    if (!error_.ok()) return error_;
    if (!engine.invariant_status().ok()) return engine.invariant_status();
  }
  if (!assembler.status().ok()) return assembler.status();
  // As a process's exit waits for its device: copies still under way land.
  if (absl::Status s = WaitUntil([&] { return copies_.AllDone(); },
                                 "copies are under way when the program ends");
      !s.ok()) {
    return s;
  }
  if (driver_ != nullptr) {
    // As the cuda backend drains CUPTI at the end: everything the driver
    // did is known before the books close.
    DeliverRecords(queue_records_, kNever);
    DeliverRecords(records_, kNever);
    driver_->Finish();
  }
  engine.Finish();
  RunStats& stats = engine.mutable_stats();
  stats.time_ns = clock_.now();
  stats.dropped_faults = fault_buffer_.dropped();
  if (driver_ != nullptr) {
    // As the cuda backend's contract: traffic and faults as the device saw
    // them (CUPTI's), the engine's own requests in fault_migrated_bytes and
    // prefetch_bytes.
    stats.h2d_bytes = moved_h2d_bytes_;
    stats.stale_eviction_records = stale_eviction_records_;
    stats.call_h2d_bytes = call_h2d_bytes_;
    stats.call_d2h_bytes = call_d2h_bytes_;
    stats.d2h_bytes = moved_d2h_bytes_;
    stats.faults = raised_faults_;
    const DeviceCounts end{moved_h2d_bytes_, moved_d2h_bytes_, raised_faults_};
    for (size_t i = 0; i < stats.per_iteration.size() && i < iteration_marks_.size(); ++i) {
      const DeviceCounts& from = iteration_marks_[i];
      const DeviceCounts& to = i + 1 < iteration_marks_.size() ? iteration_marks_[i + 1] : end;
      stats.per_iteration[i].h2d_bytes = to.h2d_bytes - from.h2d_bytes;
      stats.per_iteration[i].d2h_bytes = to.d2h_bytes - from.d2h_bytes;
      stats.per_iteration[i].faults = to.faults - from.faults;
    }
  }
  return error_;
}

absl::Status SimBackend::ExecuteKernel(uint32_t exec_id, Nanos compute_ns) {
  kernel_running_ = true;
  const absl::Status status = ExecuteKernelAccesses(exec_id, compute_ns);
  kernel_running_ = false;
  return status;
}

absl::Status SimBackend::ExecuteKernelAccesses(uint32_t exec_id, Nanos compute_ns) {
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
  // Ordered: one cursor over everything. Spread: issuer i starts i/n of the
  // way in and walks its share.
  cursors_.assign(options_.spread_access ? sm_count : 1, Cursor{});
  for (uint64_t i = 0; i < cursors_.size(); ++i) {
    const uint64_t first = total * i / cursors_.size();
    Cursor& cursor = cursors_[i];
    cursor.offset = first;
    cursor.left = total * (i + 1) / cursors_.size() - first;
    AdvanceCursor(cursor, 0);  // onto the range that holds page `first`
  }
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
  while (!ready_.empty() || !stalled_.empty() || !remote_waits_.empty()) {
    const Picos next_sm = ready_.empty() ? kNeverPicos : ready_.top().first;
    // Ties go to the SMs, so faults raised at one instant share a batch.
    if (next_system != kNever && next_system * kPicosPerNano < next_sm) {
      ProcessSystemEventAtOrBefore(next_system);
      if (!error_.ok()) return error_;
      if (!engine_->health().ok()) return engine_->health();
      if (driver_ != nullptr && !driver_->health().ok()) return driver_->health();
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
      } else if (device_memory_.IsRemote(sm.page)) {
        // The fault was answered with a remote mapping.
        AccessRemotely(sm_index, sm.bytes, sm.write, time, time + per_access);
        next_system = NextSystemEventTime();
      } else {
        Fault(sm_index, sm.page, sm.write, time);
        next_system = NextSystemEventTime();
      }
      continue;
    }
    Cursor& cursor = cursors_[options_.spread_access ? sm_index : 0];
    if (cursor.left == 0) {
      finish = std::max(finish, time);  // this SM has no work left
      continue;
    }
    const AccessRange& range = ranges_[cursor.range];
    const PageNumber page = range.first_page + cursor.offset;
    const bool write = range.write;
    const uint64_t mapped =
        device_memory_.MappedRun(page, std::min(range.pages - cursor.offset, cursor.left));
    if (mapped == 0) {
      const uint64_t bytes = range.BytesOf(cursor.offset, 1);
      AdvanceCursor(cursor, 1);
      if (device_memory_.IsRemote(page)) {
        AccessRemotely(sm_index, bytes, write, time, time + per_access);
      } else {
        sms_[sm_index].bytes = bytes;
        Fault(sm_index, page, write, time);
      }
      next_system = NextSystemEventTime();
      continue;
    }
    const Picos limit = next_system == kNever ? kNeverPicos : next_system * kPicosPerNano;
    if (options_.spread_access) {
      // Its own hits, one access each, up to the next system event: no other
      // issuer shares its pages.
      uint64_t taken = mapped;
      if (limit != kNeverPicos && per_access > 0) {
        taken = std::min<uint64_t>(mapped, static_cast<uint64_t>((limit - time) / per_access) + 1);
      }
      ready_.PushAfterAccess(time + static_cast<Picos>(taken) * per_access, sm_index);
      device_memory_.RecordAccesses(page, taken, write);
      stats.page_accesses += taken;
      AdvanceCursor(cursor, taken);
      continue;
    }
    // Hits need no service, so the SMs take the mapped pages one each, in
    // the same time order as one at a time, until the run ends or a woken
    // SM or a system event comes first.
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
    AdvanceCursor(cursor, taken);
  }
  clock_.AdvanceTo((finish + kPicosPerNano - 1) / kPicosPerNano);
  return error_;
}

absl::Status SimBackend::ExecuteHostKernel(const KernelAssembler& kernel,
                                           absl::FunctionRef<void(const Event&)> program_event) {
  if (options_.g10_faults() || driver_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "sim: kernel %d runs on the host, which the sim models only with the default "
        "faults=batched and the policy in the driver (not faults=g10 or policy_from=user)",
        kernel.kernel_begin().exec_id));
  }
  // No launch: the CPU runs it in program order, once the device's kernels
  // before it are done (they are: kernels run back to back on one stream).
  // Its pages are claimed before the engine hears of its begin, so that a
  // prefetch the policy asks for at the begin already finds them held.
  ++engine_->mutable_stats().host_kernels;
  std::vector<HostAccess> accesses;
  for (const Event& access : kernel.accesses()) {
    accesses.push_back({access.address, access.size, access.access != AccessType::kRead});
  }
  if (absl::Status s = AccessFromHost(
          accesses, kernel.kernel_begin().duration_ns,
          absl::StrFormat("host kernel %d", kernel.kernel_begin().exec_id),
          [&] { program_event(kernel.kernel_begin()); });
      !s.ok()) {
    return s;
  }
  program_event(kernel.kernel_end());
  return error_;
}

absl::Status SimBackend::AccessFromHost(absl::Span<const HostAccess> accesses, Nanos duration,
                                        const std::string& who,
                                        absl::FunctionRef<void()> claimed) {
  // A write waits for the copies that still read what it overwrites (HUM
  // write-protects a copy's source until the copy has landed), and any
  // access for the DMA copies that still read or write its buffer.
  const auto protected_write = [&] {
    return std::any_of(accesses.begin(), accesses.end(), [&](const HostAccess& access) {
      return (access.write && copies_.Protects(access.address, access.size)) ||
             copies_.DmaTouches(access.address, access.size, access.write);
    });
  };
  if (absl::Status s = WaitForCopies([&] { return !protected_write(); },
                                     who + " writes the source of a copy");
      !s.ok()) {
    return s;
  }
  RunStats& stats = engine_->mutable_stats();
  const Nanos start = clock_.now();
  for (const HostAccess& access : accesses) {
    engine_->ClaimForHost(access.address, access.size, access.write);
  }
  claimed();
  if (absl::Status s = WaitUntil([&] { return engine_->HostClaimsSettled(); },
                                 absl::StrFormat("in %s: its pages are on the device and "
                                                 "nothing moves them",
                                                 who));
      !s.ok()) {
    return s;
  }
  stats.host_wait_ns += clock_.now() - start;
  if (absl::Status s = AdvanceIdle(clock_.now() + duration); !s.ok()) return s;
  engine_->ReleaseHostClaims();
  return error_;
}

absl::Status SimBackend::RunCopy(const Event& event) {
  if (options_.g10_faults() || driver_ != nullptr) {
    return absl::FailedPreconditionError(
        "sim: the program copies between host and device buffers, which the sim models only "
        "with the default faults=batched and the policy in the driver (not faults=g10 or "
        "policy_from=user)");
  }
  absl::StatusOr<CopyCommand> copy = CopyOf(event);  // the assembler checked it
  if (!copy.ok()) return copy.status();
  RunStats& stats = engine_->mutable_stats();
  const CopyId id = stats.copies++;
  const CopyMode mode = engine_->policy().HowToCopy(*copy);
  if (mode == CopyMode::kHostAccess) {
    // As unified memory runs the program: the host writes the destination
    // (or reads the source) in place, at once.
    const HostAccess access{copy->device_address, copy->size, copy->to_device()};
    return AccessFromHost({&access, 1}, 0, absl::StrFormat("copy %d", id), [] {});
  }
  if (absl::Status s = copies_.Issue(id, *copy, mode, clock_.now()); !s.ok()) return s;
  return WaitForCopies([&] { return !copies_.HoldsHost(); }, absl::StrFormat("copy %d", id));
}

absl::Status SimBackend::AwaitLaunch(uint32_t exec_id, absl::Span<const Event> accesses) {
  bool early = false;
  if (absl::Status s = WaitForCopies(
          [&] {
            absl::StatusOr<bool> may = copies_.MayLaunch(exec_id, accesses, early);
            if (!may.ok() && error_.ok()) error_ = may.status();
            return !may.ok() || *may;
          },
          absl::StrFormat("kernel %d waits for the copies before it", exec_id));
      !s.ok()) {
    return s;
  }
  if (early) ++engine_->mutable_stats().early_launches;
  copies_.NoteKernelLaunched();
  return error_;
}

absl::Status SimBackend::WaitForCopies(absl::FunctionRef<bool()> done, const std::string& what) {
  const Nanos start = clock_.now();
  absl::Status status = WaitUntil(done, what + ", and the copies do not move");
  engine_->mutable_stats().copy_wait_ns += clock_.now() - start;
  return status;
}

absl::Status SimBackend::WaitUntil(absl::FunctionRef<bool()> done, const std::string& what) {
  while (!done()) {
    if (!error_.ok()) return error_;
    if (!engine_->health().ok()) return engine_->health();
    const Nanos next = NextSystemEventTime();
    if (next == kNever) {
      return absl::FailedPreconditionError(absl::StrFormat("deadlock %s", what));
    }
    ProcessSystemEventAtOrBefore(next);
  }
  if (!engine_->health().ok()) return engine_->health();
  return error_;
}

absl::Status SimBackend::ExecuteKernelG10(uint32_t exec_id, Nanos compute_ns) {
  const auto times = fault_times_.find(exec_id);
  if (times == fault_times_.end()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "sim: faults=g10 charges each kernel from its times measured with faults, and kernel "
        "%d has none; only G10's graphs carry them (--workload=g10, or a trace recorded from "
        "one): use the default faults=batched for this program",
        exec_id));
  }
  exec_id_ = exec_id;
  absl::flat_hash_set<BlockNumber> blocks;
  for (const AccessRange& range : ranges_) {
    const BlockNumber last = BlockOfPage(range.first_page + range.pages - 1);
    for (BlockNumber block = BlockOfPage(range.first_page); block <= last; ++block) {
      blocks.insert(block);
    }
  }
  if (blocks.size() > device_memory_.capacity_frames()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "sim: faults=g10: kernel %d touches %d blocks, more than the device's %d frames; "
        "G10's model runs a kernel only with every page of its tensors resident, so raise "
        "--capacity",
        exec_id, blocks.size(), device_memory_.capacity_frames()));
  }
  const Nanos start = clock_.now();
  G10KernelFaults kernel;
  kernel.ideal_ns = compute_ns;
  kernel.pf_ns = times->second.first;
  kernel.input_pf_ns = times->second.second;
  for (const AccessRange& range : ranges_) {
    (range.write ? kernel.output_pages : kernel.input_pages) += range.pages;
  }
  // G10 asks for every missing page of the kernel's tensors at its start.
  RaiseMissingPages(&kernel);
  const Nanos charged_end =
      start + compute_ns +
      G10FaultTime(kernel, device_,
                   options_.fault_model == SimOptions::FaultModel::kG10Measured
                       ? G10Times::kMeasured
                       : G10Times::kArtifact);

  // The kernel runs once all its pages are in; pages evicted meanwhile
  // are asked for again, as G10 re-queues a required tensor's evicted
  // pages. A policy whose own moves keep taking them (prefetches for later
  // kernels choosing the waiting kernel's blocks as victims) would go on
  // forever.
  constexpr int kMaxRounds = 64;
  int rounds = 0;
  while (!waiting_.empty()) {
    const Nanos next = NextSystemEventTime();
    if (next == kNever && RaiseStrandedPages()) continue;
    if (next == kNever) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "deadlock in kernel %d: %d blocks wait on faults that cannot be serviced (the "
          "policy refused every victim, or the capacity of %d frames is too small)",
          exec_id, waiting_.size(), device_memory_.capacity_frames()));
    }
    ProcessSystemEventAtOrBefore(next);
    if (!error_.ok()) return error_;
    if (!engine_->health().ok()) return engine_->health();
    if (!waiting_.empty()) continue;
    // All in: a page evicted while the rest came is asked for again (or,
    // brought back by a prefetch meanwhile, waited for).
    RaiseMissingPages(nullptr);
    if (!waiting_.empty() && ++rounds > kMaxRounds) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "sim: faults=g10: kernel %d's pages were evicted %d times while it waited for "
          "the rest, by the policy's own moves (its prefetches' victims); G10's model runs "
          "a kernel only with all its pages resident at once, which this policy does not "
          "leave at %d frames: use faults=batched or more --capacity",
          exec_id, kMaxRounds, device_memory_.capacity_frames()));
    }
  }
  // Every page is in; the kernel's accesses are recorded (its writes
  // dirty their pages) and it ends when G10's charged time is over too.
  RunStats& stats = engine_->mutable_stats();
  for (const AccessRange& range : ranges_) {
    for (uint64_t offset = 0; offset < range.pages;) {
      const uint64_t run = device_memory_.MappedRun(range.first_page + offset, range.pages - offset);
      if (run == 0) break;  // checked mapped above; nothing runs in between
      device_memory_.RecordAccesses(range.first_page + offset, run, range.write);
      offset += run;
    }
    stats.page_accesses += range.pages;
  }
  stats.stall_ns += std::max<Nanos>(0, clock_.now() - start - compute_ns);
  return AdvanceIdle(std::max(clock_.now(), charged_end));
}

void SimBackend::RaiseMissingPages(G10KernelFaults* counts) {
  const MemoryView& memory = engine_->memory_state();
  for (const AccessRange& range : ranges_) {
    for (uint64_t offset = 0; offset < range.pages;) {
      const PageNumber page = range.first_page + offset;
      const uint64_t mapped = device_memory_.MappedRun(page, range.pages - offset);
      if (mapped > 0) {
        offset += mapped;
        continue;
      }
      ++offset;
      const BlockNumber block = BlockOfPage(page);
      const int index = PageIndexInBlock(page);
      if (auto it = waiting_.find(block); it != waiting_.end() && it->second.test(index)) {
        continue;  // counted once, as G10 marks a page in transfer
      }
      waiting_[block].set(index);
      const BlockState* state = memory.Find(block);
      if (ArrivesWithoutFault(state, block, index)) continue;
      if (counts != nullptr) {
        const bool from_storage = state != nullptr && state->in_storage.test(index);
        ++(range.write ? counts->missing_output_pages : counts->missing_input_pages);
        if (from_storage) {
          ++(range.write ? counts->storage_output_pages : counts->storage_input_pages);
        }
      }
      RaiseG10Fault(page, range.write);
    }
  }
}

bool SimBackend::ArrivesWithoutFault(const BlockState* state, BlockNumber block,
                                     int index) const {
  return (state != nullptr && state->in_flight.test(index)) ||
         engine_->QueuedPrefetchPages(block).test(index);
}

bool SimBackend::AwaitedButNotRaised(BlockNumber block, int index) const {
  auto waiting = waiting_.find(block);
  if (waiting == waiting_.end() || !waiting->second.test(index)) return false;
  auto raised = raised_pages_.find(block);
  return raised == raised_pages_.end() || !raised->second.test(index);
}

bool SimBackend::RaiseStrandedPages() {
  const MemoryView& memory = engine_->memory_state();
  bool raised = false;
  for (const AccessRange& range : ranges_) {
    for (uint64_t offset = 0; offset < range.pages; ++offset) {
      const PageNumber page = range.first_page + offset;
      const BlockNumber block = BlockOfPage(page);
      const int index = PageIndexInBlock(page);
      if (!AwaitedButNotRaised(block, index)) continue;
      if (ArrivesWithoutFault(memory.Find(block), block, index)) continue;
      RaiseG10Fault(page, range.write);
      raised = true;
    }
  }
  return raised;
}

void SimBackend::RaiseG10Fault(PageNumber page, bool write) {
  const FaultEntry entry{page, write ? AccessType::kWrite : AccessType::kRead, 0, exec_id_,
                         clock_.now()};
  raised_.push_back(entry);
  raised_pages_[BlockOfPage(page)].set(PageIndexInBlock(page));
  if (recorder_ != nullptr) recorder_->Record(FaultEvent(entry));
  ++raised_faults_;
  if (!engine_->servicing() && !service_requested_) {
    service_requested_ = true;
    service_time_ = clock_.now();
  }
}

void SimBackend::NoteLanded(BlockNumber block) {
  auto it = waiting_.find(block);
  if (it == waiting_.end()) return;
  it->second &= ~device_memory_.Mapped(block);
  if (it->second.none()) waiting_.erase(it);
}

void SimBackend::AdvanceCursor(Cursor& cursor, uint64_t pages) {
  cursor.left -= std::min(cursor.left, pages);
  cursor.offset += pages;
  // Only spread access's starting position crosses ranges; a move within
  // a run ends at most at its range's end.
  while (cursor.range < ranges_.size() && cursor.offset >= ranges_[cursor.range].pages) {
    cursor.offset -= ranges_[cursor.range].pages;
    ++cursor.range;
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
  if (fault_writes_.Raise(entry, now / kPicosPerNano, fault_buffer_) && recorder_ != nullptr) {
    recorder_->Record(FaultEvent(entry));
  }
  ++raised_faults_;
  // The engine fetches once every SM that faults at this instant has done
  // so: at the next whole nanosecond, after the SM events before it, and
  // the driver's wake-up (fault_wake_ns) later.
  if (!FaultServer().servicing() && !service_requested_) {
    RequestService((now + kPicosPerNano - 1) / kPicosPerNano + device_.fault_wake_ns);
  }
}

void SimBackend::AccessRemotely(uint32_t sm, uint64_t bytes, bool write, Picos now,
                                Picos computed) {
  LinkTransfer access;
  access.id = next_remote_access_++;
  access.direction = write ? LinkDirection::kDeviceToHost : LinkDirection::kHostToDevice;
  access.priority = TransferKind::kFaultMigration;  // an SM waits, as on a fault
  access.bytes = bytes;
  access.ready_ns = now / kPicosPerNano;
  access.remote = true;
  link_.Submit(access, clock_.now());
  remote_waits_.emplace(access.id, RemoteWait{sm, computed});
  RunStats& stats = engine_->mutable_stats();
  (write ? stats.remote_write_bytes : stats.remote_read_bytes) += bytes;
  ++stats.page_accesses;
}

void SimBackend::WakeRemoteAccessors(const std::vector<TransferId>& completed) {
  if (remote_waits_.empty()) return;
  remote_woken_.clear();
  const Picos arrived = (clock_.now() + device_.link.remote_latency_ns) * kPicosPerNano;
  for (TransferId id : completed) {
    auto it = remote_waits_.find(id);
    if (it == remote_waits_.end()) continue;
    remote_woken_.emplace_back(std::max(arrived, it->second.computed), it->second.sm);
    remote_waits_.erase(it);
  }
  std::sort(remote_woken_.begin(), remote_woken_.end());
  ready_.PushWoken(remote_woken_);
}

void SimBackend::MapRemote(BlockNumber block, const PageMask& pages,
                           const PageMask& /*fresh*/) {
  if (absl::Status mapped = device_memory_.MapRemote(block, pages); !mapped.ok() && error_.ok()) {
    error_ = mapped;
  }
}

void SimBackend::UnmapRemote(BlockNumber block, const PageMask& pages) {
  device_memory_.UnmapRemote(block, pages);
}

Nanos SimBackend::NextSystemEventTime() const {
  Nanos next = link_.NextEventTime();
  if (!replays_.empty()) next = std::min(next, replays_.top().time);
  if (service_requested_) next = std::min(next, std::max(clock_.now(), service_time_));
  next = std::min(next, records_.NextEventTime());
  next = std::min(next, queue_records_.NextEventTime());
  next = std::min(next, copies_.NextEventTime());
  return next;
}

void SimBackend::DeliverRecords(CuptiRecordStream& records, Nanos flush_start) {
  // Records are in time order, and so in collection order.
  auto flushable = [&] { return records.FrontFlushable(flush_start); };
  while (flushable()) {
    // Consecutive arrivals are one poll's faults; an eviction between them
    // is applied in its place, so the engine's books follow the driver's
    // order.
    using Kind = CuptiRecordStream::Record::Kind;
    if (records.front().kind == Kind::kOther) {
      records.PopFront();
      continue;
    }
    if (records.front().kind == Kind::kEviction) {
      const CuptiRecordStream::Record record = records.front();
      records.PopFront();
      // Pages a policy's call has brought back since this eviction, which
      // the engine knows of already: the record is stale for them. (Pages a
      // fault brought back come with a record of their own, after this.)
      PageMask stale;
      if (auto call = call_arrival_.find(record.block);
          call != call_arrival_.end() && call->second > record.time) {
        stale = device_memory_.Mapped(record.block);
        if ((stale & record.pages).any()) ++stale_eviction_records_;
      }
      engine_->OnDevicePagesEvicted(record.block, record.pages & ~stale);
      Nanos& left = left_at_[record.block];
      left = std::max(left, record.time);
      continue;
    }
    // A block's records count once, as the cuda backend reports a block
    // once per poll however many fault groups named it.
    absl::flat_hash_map<BlockNumber, PageMask> arrived;
    std::vector<BlockNumber> order;
    while (flushable() && records.front().kind != Kind::kEviction) {
      const CuptiRecordStream::Record& record = records.front();
      if (record.kind == Kind::kArrival && TellsOfArrival(record)) {
        auto [it, inserted] = arrived.try_emplace(record.block, record.pages);
        if (inserted) {
          order.push_back(record.block);
        } else {
          it->second |= record.pages;
        }
      }
      records.PopFront();
    }
    for (BlockNumber block : order) {
      const PageNumber first = FirstPageOfBlock(block);
      const PageMask& pages = arrived[block];
      for (int page = 0; page < kPagesPerBlock; ++page) {
        if (pages.test(page)) {
          delivered_.push_back(FaultEntry{first + page, AccessType::kRead, 0, exec_id_,
                                          clock_.now()});
        }
      }
    }
    // The engine's fault migrations complete at once (the driver moved the
    // data); finishing a batch fetches the next, until none is left.
    while (!delivered_.empty() || !completed_now_.empty()) {
      if (!engine_->servicing()) engine_->ServiceFaults();
      std::vector<TransferId> done;
      done.swap(completed_now_);
      for (TransferId id : done) listener_->OnTransferComplete(id);
      if (done.empty() && engine_->servicing()) break;  // waits on its own calls
    }
  }
}

bool SimBackend::TellsOfArrival(const CuptiRecordStream::Record& arrival) const {
  // An arrival older than the block's last eviction the engine has heard
  // of is over: the block has left since (a populate's fault record, which
  // comes through CUPTI, reaches the engine after the eviction the driver's
  // queue reported).
  if (auto left = left_at_.find(arrival.block);
      left != left_at_.end() && left->second > arrival.time) {
    return false;
  }
  // A copy may tell the engine nothing new, as the cuda backend reads it.
  if (!arrival.copied) return true;
  const BlockState* state = engine_->memory_state().Find(arrival.block);
  return state == nullptr || !state->ExpectsNoNewsOfACopy();
}

bool SimBackend::ProcessSystemEventAtOrBefore(Nanos until) {
  const Nanos time = NextSystemEventTime();
  if (time == kNever || time > until) return false;
  clock_.AdvanceTo(time);
  // At one instant: land transfers first, then replay, then fetch faults.
  if (link_.NextEventTime() <= clock_.now()) {
    completed_scratch_.clear();
    link_.ProcessEventsAt(clock_.now(), completed_scratch_);
    WakeRemoteAccessors(completed_scratch_);
    for (TransferId id : completed_scratch_) {
      if (device_evictions_.erase(id) > 0) continue;  // the driver's own: recorded already
      const bool driver_migration = driver_migrations_.contains(id);
      auto it = transfers_.find(id);
      if (it == transfers_.end()) continue;
      const Transfer transfer = it->second;
      transfers_.erase(it);
      if (transfer.kind == TransferKind::kEviction) {
        if (auto own = evicting_.find(transfer.block); own != evicting_.end()) {
          std::erase_if(own->second, [id](const Evicting& e) { return e.id == id; });
          if (own->second.empty()) evicting_.erase(own);
        }
      }
      if (transfer.kind != TransferKind::kEviction) {
        PageMask pages = transfer.pages;
        if (auto moving = moving_.find(id); moving != moving_.end()) {
          // User mode: only what this transfer moved; pages another one
          // brought are mapped by that one.
          pages = moving->second;
          moving_.erase(moving);
          ForgetLanding(transfer.block, pages);
          if (auto last = last_landing_.find(transfer.block);
              last != last_landing_.end() && last->second == id) {
            last_landing_.erase(last);
          }
        }
        // The referee of the blank-page race: while a kernel runs, nothing
        // maps a page that a hidden copy has yet to land.
        if (kernel_running_ && error_.ok() &&
            (pages & engine_->AwaitingCopy(transfer.block)).any()) {
          error_ = absl::InternalError(absl::StrFormat(
              "blank page: a transfer maps pages of block %#x that a hidden copy has yet to "
              "land, while a kernel runs",
              transfer.block * kBlockSize));
        }
        absl::Status mapped = device_memory_.Map(transfer.block, pages, pages & ~transfer.copy);
        if (!mapped.ok() && error_.ok()) error_ = mapped;
        if (!waiting_.empty()) NoteLanded(transfer.block);
        // It holds a frame now, or needs none unless more is landing.
        if (device_memory_.Mapped(transfer.block).any() || !landing_.contains(transfer.block)) {
          arriving_.erase(transfer.block);
          ForgetIfUnmapped(transfer.block);
        }
      }
      if (driver_ != nullptr && !driver_migration && transfer.kind != TransferKind::kEviction) {
        // The driver's books follow the pages a policy's call brought.
        driver_->OnDevicePagesArrived(transfer.block, device_memory_.Mapped(transfer.block));
        call_arrival_[transfer.block] = clock_.now();
      }
      if (driver_migration) {
        const TransferId driver_id = driver_migrations_[id];
        driver_migrations_.erase(id);
        auto pending = pending_per_block_.find(transfer.block);
        if (pending != pending_per_block_.end() && --pending->second == 0) {
          pending_per_block_.erase(pending);
        }
        driver_->OnTransferComplete(driver_id);
        if (auto caught = caught_.find(id); caught != caught_.end()) {
          // A call took these back before they were mapped.
          driver_->OnDevicePagesEvicted(transfer.block, caught->second);
          caught_.erase(caught);
        }
        continue;
      }
      caught_.erase(id);
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
    if (absl::Status s = copies_.OnTransfersComplete(completed_scratch_, clock_.now());
        !s.ok() && error_.ok()) {
      error_ = s;
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
    if (replay.policy != ReplayPolicy::kBlock) --batch_replays_waiting_;
    ApplyReplay(replay);
    // What the flush kept is the next batch, which waited for the replay.
    if (!FaultServer().servicing() && !service_requested_) {
      if (!fault_buffer_.empty()) {
        RequestService(clock_.now());
      } else if (!fault_writes_.empty()) {
        RequestService(fault_writes_.NextWriteTime() + device_.fault_wake_ns);
      }
    }
    return true;
  }
  if (service_requested_ && service_time_ <= clock_.now()) {
    service_requested_ = false;
    retries_owed_ = false;
    FaultServer().ServiceFaults();
    return true;
  }
  if (copies_.NextEventTime() <= clock_.now()) {
    if (absl::Status s = copies_.ProcessStagingAt(clock_.now()); !s.ok() && error_.ok()) {
      error_ = s;
    }
    return true;
  }
  queue_records_.CollectUntil(clock_.now());
  if (queue_records_.FrontDeliveryTime() <= clock_.now()) {
    DeliverRecords(queue_records_, clock_.now());
    return true;
  }
  records_.CollectUntil(clock_.now());
  if (records_.FrontDeliveryTime() <= clock_.now()) {
    DeliverRecords(records_, clock_.now() - options_.cupti.flush_cost_ns);
  }
  return true;
}

void SimBackend::ApplyReplay(const ReplayEvent& replay) {
  if (options_.g10_faults()) {
    // The kernel asks again for the pages of the last batch that the
    // engine could not bring in (no frame): G10 keeps them queued.
    const MemoryView& memory = engine_->memory_state();
    for (const FaultEntry& entry : fetched_) {
      const PageNumber page = entry.page;
      const BlockNumber block = BlockOfPage(page);
      const int index = PageIndexInBlock(page);
      if (!AwaitedButNotRaised(block, index) || device_memory_.IsMapped(page)) continue;
      const BlockState* state = memory.Find(block);
      if (state != nullptr && state->in_flight.test(index)) continue;
      RaiseG10Fault(page, entry.access != AccessType::kRead);
    }
    fetched_.clear();
    return;
  }
  if (replay.policy != ReplayPolicy::kBlock) {
    FlushBeforeReplay();
    retries_owed_ = true;
  }
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

void SimBackend::FlushBeforeReplay() {
  // The driver keeps the faults raised while the batch was serviced, which
  // the replay would only raise again, unless duplicates crowded the batch.
  const bool update_put =
      device_.replay_flush == DeviceConfig::ReplayFlush::kAll ||
      fault_buffer_.last_fetch_duplicates() * 100 >
          fault_buffer_.last_fetch_count() * static_cast<size_t>(device_.replay_update_put_percent);
  if (update_put) {
    fault_buffer_.Flush();
  } else {
    fault_buffer_.FlushToLastFetch();
  }
}

size_t SimBackend::FetchFromFaultBuffer(absl::Span<FaultEntry> out) {
  if (device_.replay_flush == DeviceConfig::ReplayFlush::kDriver) {
    if (batch_replays_waiting_ > 0) return 0;
    if (retries_owed_) {
      // Fetch once the woken SMs have retried (system events at an instant
      // come after its SMs): the driver's next batch cannot evict a block
      // before the accessors the replay woke for it have touched it.
      if (!service_requested_) RequestService(clock_.now());
      return 0;
    }
  }
  fault_writes_.WriteUntil(clock_.now(), fault_buffer_);
  const size_t count = fault_buffer_.Fetch(out);
  if (count > 0) CheckProgress();
  // Nothing written yet of what was raised: fetch when it is.
  if (count == 0 && !fault_writes_.empty() && !service_requested_) {
    RequestService(fault_writes_.NextWriteTime() + device_.fault_wake_ns);
  }
  return count;
}

void SimBackend::CheckProgress() {
  // A device whose memory holds few more blocks than its issuers fault on
  // at once can serve batch after batch while every issuer waits for a
  // block a batch or a prefetch evicted again: fail rather than run forever.
  const uint64_t accesses = engine_->stats().page_accesses;
  batches_without_progress_ = accesses == accesses_at_last_batch_ ? batches_without_progress_ + 1 : 0;
  accesses_at_last_batch_ = accesses;
  if (batches_without_progress_ == kBatchesWithoutProgressLimit && error_.ok()) {
    error_ = absl::FailedPreconditionError(absl::StrFormat(
        "livelock: %d fault batches in a row let no access complete: with %u frames the "
        "blocks the device's %d issuers fault on at once, and what the policy brings beside "
        "them, keep evicting each other; raise --capacity",
        kBatchesWithoutProgressLimit, static_cast<unsigned>(device_memory_.capacity_frames()),
        device_.access_streams()));
  }
}

void SimBackend::RequestService(Nanos at) {
  service_requested_ = true;
  service_time_ = at;
}

absl::Status SimBackend::AdvanceIdle(Nanos until) {
  while (ProcessSystemEventAtOrBefore(until)) {
    if (!error_.ok()) return error_;
  }
  clock_.AdvanceTo(until);
  return error_;
}

size_t SimBackend::FetchFaults(absl::Span<FaultEntry> out) {
  if (options_.g10_faults()) {
    size_t count = 0;
    fetched_.clear();
    while (count < out.size() && !raised_.empty()) {
      const FaultEntry& entry = raised_.front();
      auto raised = raised_pages_.find(BlockOfPage(entry.page));
      raised->second.reset(PageIndexInBlock(entry.page));
      if (raised->second.none()) raised_pages_.erase(raised);
      fetched_.push_back(entry);
      out[count++] = entry;
      raised_.pop_front();
    }
    return count;
  }
  if (driver_ == nullptr) return FetchFromFaultBuffer(out);
  // User mode: the run's engine hears of faults from delivered records.
  size_t count = 0;
  while (count < out.size() && !delivered_.empty()) {
    out[count++] = delivered_.front();
    delivered_.pop_front();
  }
  return count;
}

void SimBackend::Migrate(const Transfer& transfer) {
  if (!options_.policy_from_user) {
    transfers_.emplace(transfer.id, transfer);
    Submit(transfer);
    return;
  }
  if (transfer.kind == TransferKind::kFaultMigration) {
    // The driver moved these pages when it served the fault; the engine
    // hears of it only now. Completion is handed back after this call.
    completed_now_.push_back(transfer.id);
    return;
  }
  transfers_.emplace(transfer.id, transfer);
  ++pending_per_block_[transfer.block];
  calls_.push_back(transfer);
  IssueNextCall();
}

PageMask SimBackend::CatchLanding(BlockNumber block, const PageMask& pages) {
  const PageMask caught = Landing(block) & pages;
  if (caught.none()) return caught;
  for (auto& [id, moving] : moving_) {
    const PageMask lost = moving & caught;
    if (lost.none() || transfers_.at(id).block != block) continue;
    moving &= ~lost;
    caught_[id] |= lost;
  }
  ForgetLanding(block, caught);
  return caught;
}

PageMask SimBackend::Landing(BlockNumber block) const {
  auto landing = landing_.find(block);
  return landing == landing_.end() ? PageMask() : landing->second;
}

void SimBackend::ForgetLanding(BlockNumber block, const PageMask& pages) {
  auto landing = landing_.find(block);
  if (landing == landing_.end()) return;
  landing->second &= ~pages;
  if (landing->second.none()) landing_.erase(landing);
}

void SimBackend::KeepFrameWhileLanding(BlockNumber block) {
  if (landing_.contains(block) && device_memory_.Mapped(block).none()) arriving_.insert(block);
}

void SimBackend::SubmitDriverMigration(const Transfer& transfer) {
  Transfer own = transfer;
  own.id = next_device_transfer_++;
  driver_migrations_.emplace(own.id, transfer.id);
  transfers_.emplace(own.id, own);
  ++pending_per_block_[own.block];
  // What the run's engine will read in CUPTI's records, stamped when the
  // driver began: the block, every page of it, as the cuda backend reports
  // a transfer record's blocks. A populate copies nothing and makes no
  // transfer record: the block is heard of only if its batch's fault record
  // names it (RecordFaultBatch).
  const PageMask moving = own.pages & ~device_memory_.Mapped(own.block) & ~Landing(own.block);
  const uint64_t copied = MaskBytes(own.copy & moving);
  if (copied > 0) {
    RecordTransfer(CuptiRecordStream::Record::Kind::kArrival, own.block, FullPageMask(),
                   CuptiRecordStream::RecordsFor(copied, kFaultCopyBytesPerRecord));
    unheard_.erase(own.block);
  } else if (options_.populate_records == SimOptions::PopulateRecords::kAll) {
    RecordArrival(own.block);
  } else if (moving.any() && !batch_named_blocks_.contains(own.block)) {
    unheard_.insert(own.block);
  }
  Submit(own);
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

void SimBackend::RecordArrival(BlockNumber block, uint64_t cupti_records) {
  records_.Push({clock_.now(), CuptiRecordStream::Record::Kind::kArrival, block, FullPageMask(),
                 cupti_records});
}

void SimBackend::RecordTransfer(CuptiRecordStream::Record::Kind kind, BlockNumber block,
                                const PageMask& pages, uint64_t cupti_records) {
  const bool copied = kind == CuptiRecordStream::Record::Kind::kArrival;
  if (!options_.transfers_from_queue) {
    records_.Push({clock_.now(), kind, block, pages, cupti_records, copied});
    return;
  }
  queue_records_.Push({clock_.now(), kind, block, pages, 1, copied});
  // CUPTI records it too, into the buffers its fault records share.
  records_.Push({clock_.now(), CuptiRecordStream::Record::Kind::kOther, block, PageMask(),
                 cupti_records});
}

void SimBackend::RecordFaultBatch(absl::Span<const FaultEntry> batch) {
  const BlockNumber first_fault_block = BlockOfPage(batch.front().page);
  batch_named_blocks_.clear();
  if (options_.faults_from_queue) {
    // The driver's queue tells of every fault as the batch's service
    // begins; the engine takes each block once per poll (DeliverRecords).
    for (const FaultEntry& fault : batch) {
      const BlockNumber block = BlockOfPage(fault.page);
      if (!batch_named_blocks_.insert(block).second) continue;
      unheard_.erase(block);
      queue_records_.Push(
          {clock_.now(), CuptiRecordStream::Record::Kind::kArrival, block, FullPageMask(), 1});
    }
    // CUPTI's fault record still fills its buffers.
    records_.Push({clock_.now(), CuptiRecordStream::Record::Kind::kOther, first_fault_block,
                   PageMask(), 1});
    return;
  }
  batch_named_blocks_.insert(first_fault_block);
  unheard_.erase(first_fault_block);
  // One fault record per batch, naming its first fault; under kAll every
  // migration has a record of its own instead.
  if (options_.populate_records == SimOptions::PopulateRecords::kFirstFault) {
    RecordArrival(first_fault_block);
  }
}

void SimBackend::IssueNextCall() {
  if (call_running_ != 0 || calls_.empty()) return;
  Transfer call = calls_.front();
  calls_.pop_front();
  if (call.kind == TransferKind::kEviction) ForgetQueuedEviction(call.block);
  call_running_ = call.id;
  call.not_before = std::max(call.not_before, clock_.now());
  // The call's own transfer records fill CUPTI's buffers too; the engine
  // knows of the call already. (The eviction that made room for it has a
  // record of its own.)
  if (const uint64_t moved = Submit(call); moved > 0) {
    records_.Push({clock_.now(), CuptiRecordStream::Record::Kind::kOther, call.block, PageMask(),
                   CuptiRecordStream::RecordsFor(moved, kCallBytesPerRecord)});
  }
}

uint64_t SimBackend::Submit(const Transfer& transfer) {
  const bool eviction = transfer.kind == TransferKind::kEviction;
  TransferId after = transfer.after;
  uint64_t bytes = transfer.copy_bytes();
  bool populates = false;
  // Pages to bring with no data to copy (a zero-fill) and nothing else.
  bool zero_fills = !eviction && bytes == 0 && (transfer.pages & ~transfer.copy).any();
  if (eviction) {
    PageMask caught;
    PageMask unmapped = transfer.pages;
    if (options_.policy_from_user) {
      // A pre-eviction the driver overtook finds only what the device
      // still holds; what it drops is gone, and the driver hears of both.
      const PageMask held = device_memory_.Mapped(transfer.block) & transfer.pages;
      const PageMask dropped = transfer.pages & ~transfer.copy;
      // Pages still on their way (the driver's, which the engine has not
      // heard of) land before this call runs, one thing at a time: the
      // call takes them back too, and they are never mapped.
      caught = CatchLanding(transfer.block, transfer.pages);
      bytes = MaskBytes(transfer.copy & held) + MaskBytes(caught & ~dropped);
      moved_d2h_bytes_ += bytes;
      call_d2h_bytes_ += bytes;
      driver_->OnDevicePagesEvicted(transfer.block, held & transfer.copy);
      // A discard reaches the host's copy too: garbage the driver has
      // written back since the policy decided is not copied in again
      // (umlab_cuda_calibrate's discard_on_host, docs/devices.md).
      driver_->OnDevicePagesDiscarded(transfer.block, (held & ~transfer.copy) | transfer.drop);
      // A call that writes part of the block back leaves what it discarded
      // on the device, holding the frame; the driver writes it back when it
      // evicts the block (EvictForRoom).
      const PageMask stays = held & ~transfer.copy;
      if (options_.partial_discards_stay && (held & transfer.copy).any() && stays.any()) {
        discarded_on_device_[transfer.block] |= stays;
        unmapped &= ~stays;
      }
    }
    if (options_.g10_faults()) evicting_[transfer.block].push_back({transfer.id, transfer.pages});
    device_memory_.Unmap(transfer.block, unmapped);
    ForgetDiscardedOnDevice(transfer.block, unmapped);
    // Pages of the block still landing keep its frame.
    KeepFrameWhileLanding(transfer.block);
    ForgetIfUnmapped(transfer.block);
  } else if (options_.policy_from_user) {
    // A pre-eviction still queued for this block was decided about pages
    // it held before; pages arriving now are not what it meant to evict.
    if (queued_evictions_.contains(transfer.block)) {
      for (Transfer& call : calls_) {
        if (call.kind != TransferKind::kEviction || call.block != transfer.block) continue;
        call.pages &= ~transfer.pages;
        call.copy &= ~transfer.pages;
      }
    }
    // Only pages neither mapped nor on their way move; data exists for
    // those the driver's books hold valid (the rest it zero-fills). With
    // nothing to move, the transfer completes after the one bringing the
    // block's pages, as a fault waits on a migration under way.
    const PageMask moving =
        transfer.pages & ~device_memory_.Mapped(transfer.block) & ~Landing(transfer.block);
    const BlockState* books = driver_->memory_state().Find(transfer.block);
    const PageMask invalid = books == nullptr ? PageMask() : books->invalid;
    bytes = transfer.kind == TransferKind::kFaultMigration
                ? MaskBytes(transfer.copy & moving)
                : MaskBytes(moving & ~invalid);
    populates = transfer.kind == TransferKind::kPrefetch && (moving & invalid).any();
    zero_fills = bytes == 0 && moving.any();
    // The driver's own migrations pass here too; the rest are the calls.
    const bool call = !driver_migrations_.contains(transfer.id);
    moved_h2d_bytes_ += bytes;
    if (call) call_h2d_bytes_ += bytes;
    moving_[transfer.id] = moving;
    if (moving.none()) {
      if (auto last = last_landing_.find(transfer.block); last != last_landing_.end()) {
        after = std::max(after, last->second);
      }
    } else {
      landing_[transfer.block] |= moving;
      last_landing_[transfer.block] = transfer.id;
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
          ForgetLanding(transfer.block, moving);
          moved_h2d_bytes_ -= bytes;
          if (call) call_h2d_bytes_ -= bytes;
          moving_.erase(transfer.id);
          waiting_for_room_.push_back(transfer);
          return 0;
        }
        after = std::max(after, room);
      }
      arriving_.insert(transfer.block);
    }
    NoteArrival(transfer.block);
  } else if (options_.g10_faults()) {
    after = 0;
    if (auto own = evicting_.find(transfer.block); own != evicting_.end()) {
      for (const Evicting& out : own->second) {
        if ((out.pages & transfer.pages).any()) after = std::max(after, out.id);
      }
    }
  }
  // User mode: the driver does one thing at a time in the order it was
  // asked; faults have no priority over calls.
  const TransferKind priority =
      options_.policy_from_user ? TransferKind::kFaultMigration : transfer.kind;
  LinkTransfer on_link{transfer.id,
                       eviction ? LinkDirection::kDeviceToHost : LinkDirection::kHostToDevice,
                       priority, bytes, transfer.not_before, after};
  // User mode: every eviction the engine asks for is a policy's call.
  on_link.evicts_for_room = !options_.policy_from_user;
  // The driver's fault path (its own migrations in user mode, the engine's
  // fault migrations inside the driver) copies at its own rate.
  on_link.fault_path = options_.policy_from_user ? driver_migrations_.contains(transfer.id)
                                                 : transfer.kind == TransferKind::kFaultMigration;
  // User mode: a policy's call that brings pages with no data has the
  // driver populate them, which costs it even with nothing to copy.
  on_link.populates = populates;
  // The driver's fault path works for a block it zero-fills too.
  on_link.fault_zero_fill = on_link.fault_path && zero_fills;
  // User mode: a policy's prefetch call (not the driver's own prefetcher),
  // which the driver may serve beside its fault path.
  on_link.prefetch_call = options_.policy_from_user && !eviction && !on_link.fault_path &&
                          transfer.kind == TransferKind::kPrefetch;
  on_link.storage_bytes = std::min(bytes, transfer.storage_bytes());
  link_.Submit(on_link, clock_.now());
  return bytes;
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
    discarded_on_device_.erase(victim);
    arrival_of_.erase(victim);
    arrival_order_.erase(it);
    device_memory_.Unmap(victim, pages);
    const TransferId id = next_device_transfer_++;
    device_evictions_.emplace(id, victim);
    moved_d2h_bytes_ += MaskBytes(pages);
    // The driver knows at once; the run's engine reads it in its records,
    // stamped when the write-back began.
    driver_->OnDevicePagesEvicted(victim, pages);
    unheard_.erase(victim);
    RecordTransfer(CuptiRecordStream::Record::Kind::kEviction, victim, pages,
                   CuptiRecordStream::RecordsFor(MaskBytes(pages), kEvictionBytesPerRecord));
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
    // nothing.
    link_.Submit(LinkTransfer{it->id, LinkDirection::kDeviceToHost, TransferKind::kFaultMigration,
                              0, clock_.now(), 0},
                 clock_.now());
    ForgetQueuedEviction(block);
    it = calls_.erase(it);
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

void SimBackend::ForgetDiscardedOnDevice(BlockNumber block, const PageMask& unmapped) {
  auto stays = discarded_on_device_.find(block);
  if (stays == discarded_on_device_.end()) return;
  stays->second &= ~unmapped;
  if (stays->second.none()) discarded_on_device_.erase(stays);
}

void SimBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  if (driver_ != nullptr) {
    driver_->OnDevicePagesDiscarded(block, device_memory_.Mapped(block) & pages);
    CatchLanding(block, pages);  // dropped on arrival
  }
  device_memory_.Unmap(block, pages);
  ForgetDiscardedOnDevice(block, pages);
  KeepFrameWhileLanding(block);
  ForgetIfUnmapped(block);
}

PageUse SimBackend::QueryUse(BlockNumber block) const {
  PageUse use = device_memory_.Use(block);
  // The driver keeps no dirty bits: it writes back whatever it holds.
  if (options_.policy_from_user) use.dirty = device_memory_.Mapped(block);
  return use;
}

void SimBackend::Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) {
  // User mode: the driver's engine replays; the run's engine serves no
  // fault the device waits on.
  if (driver_ != nullptr) return;
  ScheduleReplay(policy, block, not_before);
}

void SimBackend::ScheduleReplay(ReplayPolicy policy, BlockNumber block, Nanos not_before) {
  const ReplayEvent replay{std::max(clock_.now(), not_before), replay_sequence_++, policy,
                           block};
  // A replay that is due now happens before the engine fetches again, so a
  // flush discards exactly the entries the replay will regenerate.
  if (replay.time == clock_.now()) {
    ApplyReplay(replay);
  } else {
    replays_.push(replay);
    if (policy != ReplayPolicy::kBlock) ++batch_replays_waiting_;
  }
}

absl::Status SimBackend::CheckConsistency(const Engine& engine) const {
  for (const BlockState& block : engine.memory_state().blocks()) {
    // User mode: a policy call still queued when the program ended has not
    // reached the device (nor has what waits for room), and faults
    // delivered while the engine waited on a call of its own were never
    // serviced.
    if (pending_per_block_.contains(block.number)) continue;
    // User mode: the driver populated pages of it that no record named.
    if (unheard_.contains(block.number)) continue;
    if (std::any_of(delivered_.begin(), delivered_.end(), [&](const FaultEntry& fault) {
          return BlockOfPage(fault.page) == block.number;
        })) {
      continue;
    }
    if (device_memory_.Remote(block.number) != block.remote) {
      return absl::InternalError(absl::StrFormat(
          "block %#x: the device maps %d pages remotely but the engine records %d",
          block.number * kBlockSize, device_memory_.Remote(block.number).count(),
          block.remote.count()));
    }
    PageMask mapped = device_memory_.Mapped(block.number);
    // User mode: pages a pre-eviction discarded may stay on the device
    // where the engine no longer counts them.
    if (auto stays = discarded_on_device_.find(block.number);
        stays != discarded_on_device_.end()) {
      mapped &= ~stays->second;
    }
    // User mode: the engine counts every page of a block the driver served
    // as resident, as the cuda backend does; the device may hold fewer.
    const bool agrees = options_.policy_from_user ? (mapped & ~block.resident).none()
                                                  : mapped == block.resident;
    if (!agrees) {
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
            "kernel module) or user (from user space over an unmodified driver that serves "
            "faults by itself, makes room with its own oldest-arrival victim and full "
            "write-back, and is heard of through CUPTI's flushes; the policy's calls one at a "
            "time in order: what --backend=cuda:memory=driver runs)",
            {},
            {"driver", "user"}},
           {"driver", ParamType::kString, "uvm-default",
            "policy_from=user: the policy that models the unmodified driver's own fault "
            "service: uvm-default (its tree prefetcher and thrashing detection; the best fit to "
            "the H200, docs/fidelity.md) or demand (the faulted pages only)"},
           {"flush_us", ParamType::kDouble, "1000",
            "policy_from=user: pause between CUPTI flushes, as the cuda backend's flush_us",
            ParamRange::Closed(0, 2000)},
           {"flush_cost_us", ParamType::kDouble, "2000",
            "policy_from=user: how long a CUPTI flush takes (about 2 ms on an H200); records "
            "reach the engine when the first flush after them ends",
            ParamRange::AtLeast(0)},
           {"collect_us", ParamType::kDouble, "16000",
            "policy_from=user: CUPTI collects the driver's records in batches this far apart; a "
            "flush hands over only what was collected (the H200's 5-19 ms delivery, "
            "docs/cuda.md)",
            ParamRange::AtLeast(0)},
           {"buffer_kb", ParamType::kInt, "64",
            "policy_from=user: size of each CUPTI record buffer, as the cuda backend's buffer_kb "
            "(104-byte records); a flush hands over only full buffers, so records come late "
            "where the driver makes few; 0: every record as if its buffer were full",
            ParamRange::Closed(0, 1 << 16)},
           {"transfers", ParamType::kString, "uvm",
            "policy_from=user: where the engine hears of the driver's transfers, as the cuda "
            "backend's transfers: uvm (the driver's own event queue, within a poll) or cupti "
            "(CUPTI's records, with its collections, buffers and flushes)",
            {},
            {"uvm", "cupti"}},
           {"fault_records", ParamType::kString, "cupti",
            "policy_from=user: where the engine hears of the faults the driver serviced, as the "
            "cuda backend's fault_records: uvm (the driver's event queue: every faulted block of "
            "a batch, within a poll) or cupti (CUPTI's fault record of each batch, naming its "
            "first fault, late; populate_records says what else is recorded)",
            {},
            {"uvm", "cupti"}},
           {"partial_discards", ParamType::kString, "stay",
            "policy_from=user: what a pre-eviction that writes part of a block back leaves of "
            "the pages it discards: stay (on the device, holding the block's frame until the "
            "driver evicts the block and writes them back, as measured on the H200) or go (with "
            "the call)",
            {},
            {"stay", "go"}},
           {"poll_us", ParamType::kDouble, "20",
            "policy_from=user, transfers=uvm or fault_records=uvm: how often the engine drains "
            "the driver's event queue, as the cuda backend's poll_us",
            ParamRange::AtLeast(0)},
           {"populate_records", ParamType::kString, "first-fault",
            "policy_from=user: what CUPTI records of the driver's populates (pages with no data "
            "to copy): first-fault (only its fault batch's record, which names the batch's "
            "first fault, as on the H200) or all (every populated block, as a copy)",
            {},
            {"first-fault", "all"}},
           {"access", ParamType::kString, "ordered",
            "how a kernel's issuers walk its pages: ordered (all take the next page in turn, "
            "as umlab's replay kernel; what the h200 preset is calibrated on) or spread (each "
            "its own slice, as a real kernel's thread blocks partition their tensors)",
            {},
            {"ordered", "spread"}},
           {"faults", ParamType::kString, "batched",
            "how faults cost time: batched (SMs stall on each fault until its batch is fetched, "
            "fault_latency_us later, and its pages land), g10 (G10's simulator: every missing "
            "page of a kernel not already on its way or queued for prefetch faults at its start "
            "and moves at the link's pace, waiting only for its own page's write-back, and the "
            "kernel is charged a fault time from its own times measured with faults, read as "
            "the "
            "artifact's arithmetic reads them, which its published figures used) or "
            "g10-measured (the same with the measured times as the paper intends); the g10 "
            "models need a program that carries those times, as --workload=g10 does "
            "(docs/g10.md)",
            {},
            {"batched", "g10", "g10-measured"}}},
          [](const ParamMap& params, const DeviceConfig& device,
             uint64_t capacity_frames) -> absl::StatusOr<std::unique_ptr<Backend>> {
            SimOptions options;
            options.policy_from_user = params.Choice("policy_from") == 1;
            options.driver_policy = params.String("driver");
            options.cupti.flush_pause_ns = static_cast<Nanos>(params.Double("flush_us") * 1e3);
            options.cupti.flush_cost_ns =
                static_cast<Nanos>(params.Double("flush_cost_us") * 1e3);
            options.cupti.collect_period_ns =
                static_cast<Nanos>(params.Double("collect_us") * 1e3);
            options.cupti.buffer_records =
                static_cast<uint64_t>(params.Int("buffer_kb")) * 1024 / kCuptiRecordBytes;
            options.transfers_from_queue = params.Choice("transfers") == 0;
            options.faults_from_queue = params.Choice("fault_records") == 0;
            options.partial_discards_stay = params.Choice("partial_discards") == 0;
            options.poll_ns = static_cast<Nanos>(params.Double("poll_us") * 1e3);
            options.populate_records = params.Choice("populate_records") == 0
                                           ? SimOptions::PopulateRecords::kFirstFault
                                           : SimOptions::PopulateRecords::kAll;
            options.spread_access = params.Choice("access") == 1;
            constexpr SimOptions::FaultModel kFaultModels[] = {
                SimOptions::FaultModel::kBatched, SimOptions::FaultModel::kG10,
                SimOptions::FaultModel::kG10Measured};
            options.fault_model = kFaultModels[params.Choice("faults")];
            if (options.policy_from_user && options.g10_faults()) {
              return absl::InvalidArgumentError(
                  "sim:faults=g10 models G10's own fault path, which has no user-space "
                  "policy; use policy_from=driver with it");
            }
            if (options.policy_from_user && device.link.storage.present) {
              return absl::InvalidArgumentError(
                  "sim:policy_from=user models the unmodified UVM driver, which has no "
                  "storage tier; use policy_from=driver with a device that has ssd=true");
            }
            return std::make_unique<SimBackend>(device, capacity_frames, options);
          },
          // Virtual time and nothing global: runs may share the process.
          {.parallel_runs = true, .storage_tier = true}});

}  // namespace umlab
