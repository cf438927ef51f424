#include "emu/snurhac/cluster_run.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/access_pace.h"
#include "emu/snurhac/launch_plan.h"

namespace umlab::snurhac::internal {

// --- DeviceContext ----------------------------------------------------------

const MemoryView& DeviceContext::memory() const { return run_.device(device_).frames; }
Nanos DeviceContext::now() const { return run_.now(); }
uint32_t DeviceContext::current_exec_id() const { return run_.exec_id(); }
void DeviceContext::Prefetch(BlockNumber block, const PageMask& pages, uint32_t /*exec_id*/) {
  run_.RequestPrefetch(device_, block, FaultedPages{pages, PageMask()}, PrefetchSource::kPolicy);
}
void DeviceContext::CancelPrefetches() { run_.device(device_).policy_queue.clear(); }
size_t DeviceContext::queued_prefetches() const { return run_.device(device_).policy_queue.size(); }
void DeviceContext::SetPinned(BlockNumber block, bool pinned) {
  BlockState& state = run_.device(device_).frames.Get(block);
  state.pinned = pinned;
  if (!pinned) run_.device(device_).frames.NoteMayBeEvictable();
}
void DeviceContext::Refuse(const char* request) {
  run_.Fail(absl::UnimplementedError(absl::StrFormat(
      "device %d's policy asked for %s, which the cluster run does not carry out (it carries "
      "out prefetches and pins)",
      device_, request)));
}

// --- The event loop ----------------------------------------------------------

Nanos ClusterRun::NextSystemTime() const {
  Nanos next = timers_.empty() ? kNever : timers_.top().time;
  for (const auto& d : devices_) next = std::min(next, d->link.NextEventTime());
  for (const auto& port : ports_) next = std::min(next, port->NextEventTime());
  return next;
}

void ClusterRun::ProcessSystemEventsAt(Nanos time) {
  while (!timers_.empty() && timers_.top().time <= time) {
    std::function<void()> action = timers_.top().action;
    timers_.pop();
    action();
  }
  auto process = [&](PcieLink& link) {
    completed_.clear();
    link.ProcessEventsAt(time, completed_);
    const std::vector<TransferId> completed = completed_;
    for (TransferId id : completed) {
      auto it = on_transfer_.find(id);
      std::function<void()> done = std::move(it->second);
      on_transfer_.erase(it);
      done();
    }
  };
  for (auto& d : devices_) process(d->link);
  for (auto& port : ports_) process(*port);
}

bool ClusterRun::Busy(BlockNumber block) const {
  for (const auto& d : devices_) {
    auto it = d->block_jobs.find(block);
    if (it != d->block_jobs.end() && !it->second.empty()) return true;
  }
  return false;
}

absl::Status ClusterRun::CheckStep() {
  if (audit_ == nullptr) return absl::OkStatus();
  return audit_->CheckTouched([this](BlockNumber block) { return Busy(block); });
}

template <typename Done>
absl::Status ClusterRun::RunUntil(const Done& done, const char* phase) {
  while (!done()) {
    if (!error_.ok()) return error_;
    const Nanos next = NextSystemTime();
    if (!ready_.empty()) {
      const Picos limit = next == kNever ? std::numeric_limits<Picos>::max() : next * kPicosPerNano;
      if (ready_.top().time <= limit) {
        const Ready ready = ready_.top();
        ready_.pop();
        StepIssuer(ready);
        if (absl::Status status = CheckStep(); !status.ok()) return status;
        continue;
      }
    }
    if (next == kNever) {
      int waiting = 0;
      for (const auto& d : devices_) waiting += static_cast<int>(d->waiting_for_frame.size());
      return absl::InternalError(absl::StrFormat(
          "cluster run stalled in %s at %d ns: %d jobs alive, %d waiting for a frame (is every "
          "device's capacity at least the blocks one kernel needs at once?)",
          phase, now_, jobs_.size(), waiting));
    }
    now_ = next;
    ProcessSystemEventsAt(now_);
    if (absl::Status status = CheckStep(); !status.ok()) return status;
  }
  return error_;
}

// --- Kernels -------------------------------------------------------------------

PageMask ClusterRun::ArrayPages(BlockNumber block) const {
  return PagesOfArrays(program_, block);
}

absl::Status ClusterRun::Launch(const GridKernel& kernel) {
  exec_id_ = kernel.exec_id;
  ++result_.kernels;
  absl::StatusOr<LaunchPlan> plan = PlanLaunch(program_, kernel, config_.devices);
  if (!plan.ok()) return plan.status();
  if (plan->single_device) ++result_.single_device_kernels;
  // §6.4: the read-only flag for the arrays the kernel uses, by whether it
  // only reads them.
  for (const auto& [array_index, only_read] : plan->only_read) {
    const GridArray& array = program_.arrays[array_index];
    for (BlockNumber block = BlockOfAddress(array.address);
         block <= BlockOfAddress(array.address + array.bytes - 1); ++block) {
      absl::StatusOr<std::vector<Downgrade>> downgrades = directory_.SetReadOnly(block, only_read);
      if (!downgrades.ok()) return downgrades.status();
      for (const Downgrade& downgrade : *downgrades) ApplyDowngrade(downgrade);
    }
  }
  if (audit_ != nullptr) audit_->KernelBegins();
  for (int device = 0; device < config_.devices; ++device) {
    Device& d = *devices_[device];
    d.policy->OnKernelBegin(kernel.exec_id);
    StartShare(d, kernel, plan->shares[device]);
  }
  return CheckStep();
}

void ClusterRun::StartShare(Device& d, const GridKernel& kernel, const GridShare& share) {
  d.runs = SharePageRuns(program_, kernel, share);
  d.run = 0;
  d.offset = 0;
  uint64_t pages = 0;
  for (const PageRun& run : d.runs) pages += run.count;
  const Nanos compute = ShareComputeNs(kernel, share);
  // The launch command reaches nodes other than the host node over the
  // network (§6.1: the host node's runtime sends it).
  const Nanos arrival = now_ + (d.node == 0 ? 0 : config_.network.latency_ns);
  const Nanos start = arrival + config_.device.kernel_launch_ns;
  d.share_start = now_;
  d.running = true;
  if (share.empty()) {
    At(start, [this, &d] { ShareDone(d, now_); });
    return;
  }
  const AccessPace pace =
      PaceOf(compute, pages, static_cast<uint64_t>(config_.device.access_streams()));
  d.step_ps = pace.step_ps;
  if (pace.issuers == 0) {
    At(start + compute, [this, &d] { ShareDone(d, now_); });
    return;
  }
  d.issuers.assign(pace.issuers, Issuer{});
  d.issuers_active = static_cast<int>(pace.issuers);
  for (uint32_t issuer = 0; issuer < pace.issuers; ++issuer) {
    ready_.push(Ready{start * kPicosPerNano, d.index, issuer});
  }
  if (!config_.static_prefetch) return;
  // §6.5.1: the runtime's prefetch commands for this device's share, from
  // MAPA's ranges, in the accesses' order, issued once the launch reaches
  // the device's node.
  for (const PrefetchRange& range : StaticPrefetchRanges(program_, kernel, share)) {
    const PageNumber first = PageOfAddress(range.bytes.begin);
    const PageNumber last = PageOfAddress(range.bytes.end - 1);
    for (BlockNumber block = BlockOfPage(first); block <= BlockOfPage(last); ++block) {
      const PageNumber from = std::max(first, FirstPageOfBlock(block));
      const PageNumber to = std::min(last, FirstPageOfBlock(block) + kPagesPerBlock - 1);
      const PageMask pages_in_block =
          PageRangeMask(PageIndexInBlock(from), static_cast<int>(to - from + 1));
      FaultedPages wanted;
      (range.write ? wanted.write : wanted.read) = pages_in_block;
      d.static_queue.push_back(PrefetchRequest{block, wanted, PrefetchSource::kStatic});
    }
  }
  At(arrival, [this, &d] { PumpPrefetches(d); });
}

bool ClusterRun::NextPage(Device& d, Issuer& issuer) {
  while (d.run < d.runs.size() && d.offset >= d.runs[d.run].count) {
    ++d.run;
    d.offset = 0;
  }
  if (d.run == d.runs.size()) return false;
  issuer.page = d.runs[d.run].first + d.offset++;
  issuer.write = d.runs[d.run].write;
  return true;
}

void ClusterRun::StepIssuer(const Ready& ready) {
  Device& d = *devices_[ready.device];
  Issuer& issuer = d.issuers[ready.issuer];
  if (!issuer.retry && !NextPage(d, issuer)) {
    if (--d.issuers_active == 0) {
      const Nanos end = CeilNanos(ready.time);
      At(end, [this, &d] { ShareDone(d, now_); });
    }
    return;
  }
  issuer.retry = false;
  if (d.Permits(issuer.page, issuer.write)) {
    d.memory.Access(issuer.page, issuer.write);
    if (audit_ != nullptr && issuer.write) audit_->Wrote(d.index, issuer.page);
    ready_.push(Ready{ready.time + d.step_ps, ready.device, ready.issuer});
    return;
  }
  FaultEntry entry;
  entry.page = issuer.page;
  entry.access = issuer.write ? AccessType::kWrite : AccessType::kRead;
  entry.sm = ready.issuer;
  entry.exec_id = exec_id_;
  entry.time_ns = CeilNanos(ready.time);
  if (d.faults.Push(entry)) {
    ++d.stats.faults;
  } else {
    ++d.stats.dropped_faults;  // it faults again after the next replay
  }
  issuer.retry = true;
  d.stalled.push_back(ready.issuer);
  ScheduleService(d, entry.time_ns);
}

void ClusterRun::ShareDone(Device& d, Nanos time) {
  d.running = false;
  d.stats.busy_ns += time + config_.device.kernel_grid_ns - d.share_start;
  // Prefetches queued for the kernel that did not start are of no use now.
  d.static_queue.clear();
  d.policy_queue.clear();
}

bool ClusterRun::KernelDone() const {
  for (const auto& d : devices_) {
    if (d->running) return false;
  }
  return jobs_.empty() && messages_in_flight_ == 0;
}

absl::Status ClusterRun::EndKernel() {
  // §6.3: once every device has finished, the kernel-end synchronisation.
  // Off a single node the devices' reports cross the network first.
  now_ += config_.device.kernel_grid_ns + (config_.nodes() > 1 ? config_.network.latency_ns : 0);
  absl::StatusOr<std::vector<Unmap>> unmaps = directory_.EndKernel();
  if (!unmaps.ok()) return unmaps.status();
  for (const Unmap& unmap : *unmaps) {
    devices_[unmap.device]->stats.kernel_end_unmapped_pages += unmap.pages.count();
    UnmapAt(unmap.device, unmap.block, unmap.pages);
  }
  for (auto& d : devices_) d->policy->OnKernelEnd(exec_id_);
  if (absl::Status status = CheckStep(); !status.ok()) return status;
  return audit_ == nullptr ? absl::OkStatus() : audit_->CheckKernelBoundary();
}

absl::Status ClusterRun::CopyOut() {
  for (const GridArray& array : program_.arrays) {
    if (!array.copied_out) continue;
    for (BlockNumber block = BlockOfAddress(array.address);
         block <= BlockOfAddress(array.address + array.bytes - 1); ++block) {
      for (auto& d : devices_) {
        const PageMask mapped = d->memory.Mapped(block) & ArrayPages(block);
        if (mapped.none()) continue;
        Job& job = NewJob(JobKind::kEvict, *d, block);
        job.evict = ArrayPages(block);
        EnqueueJob(job);
      }
    }
  }
  return RunUntil([this] { return jobs_.empty() && messages_in_flight_ == 0; }, "the copy-out");
}

// --- The run ---------------------------------------------------------------------

namespace {

absl::Status CheckConfig(const ClusterConfig& config) {
  if (config.devices < 1 || config.devices > kMaxClusterDevices) {
    return absl::InvalidArgumentError(absl::StrFormat("a cluster has 1 to %d devices, not %d",
                                                      kMaxClusterDevices, config.devices));
  }
  if (config.devices_per_node < 1 || config.capacity_frames < 1 ||
      config.prefetch_inflight_limit < 1 || config.network.bytes_per_second <= 0 ||
      config.network.latency_ns < 0 || config.host_copy_bytes_per_second <= 0) {
    return absl::InvalidArgumentError(
        "a cluster needs at least one device per node, one frame per device, one prefetch in "
        "flight, and positive network and copy rates");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClusterResult> ClusterRun::Run(const DevicePolicyFactory& policies) {
  if (absl::Status status = CheckConfig(config_); !status.ok()) return status;
  if (absl::Status status = program_.Validate(); !status.ok()) return status;
  LinkConfig port;
  port.h2d_bytes_per_second = config_.network.bytes_per_second;
  port.d2h_bytes_per_second = config_.network.bytes_per_second;
  port.latency_ns = config_.network.latency_ns;
  for (int node = 0; node < config_.nodes(); ++node)
    ports_.push_back(std::make_unique<PcieLink>(port));
  for (int index = 0; index < config_.devices; ++index) {
    auto d = std::make_unique<Device>(index, config_);
    absl::StatusOr<std::unique_ptr<Policy>> policy = policies(index);
    if (!policy.ok()) return policy.status();
    d->policy = *std::move(policy);
    d->context = std::make_unique<DeviceContext>(*this, index);
    d->policy->Bind(d->context.get());
    devices_.push_back(std::move(d));
  }
  if (config_.check_invariants) {
    const DeviceMappings& mappings = *this;
    audit_ = std::make_unique<CoherenceAudit>(config_.devices, directory_, mappings);
  }

  // The inputs go into the host's UM space (§6.1): a host memcpy.
  uint64_t in_bytes = 0, out_bytes = 0;
  for (const GridArray& array : program_.arrays) {
    if (array.copied_in) in_bytes += array.bytes;
    if (array.copied_out) out_bytes += array.bytes;
  }
  result_.copy_in_ns = BytesTime(in_bytes, config_.host_copy_bytes_per_second);
  for (const GridArray& array : program_.arrays) {
    if (!array.copied_in) continue;
    for (BlockNumber block = BlockOfAddress(array.address);
         block <= BlockOfAddress(array.address + array.bytes - 1); ++block) {
      host_data_[block] |= ArrayPages(block);
    }
  }
  now_ = result_.copy_in_ns;
  for (const GridKernel& kernel : program_.launches) {
    if (absl::Status status = Launch(kernel); !status.ok()) return status;
    if (absl::Status status = RunUntil([this] { return KernelDone(); }, kernel.name.c_str());
        !status.ok()) {
      return status;
    }
    if (absl::Status status = EndKernel(); !status.ok()) return status;
  }
  result_.kernels_ns = now_ - result_.copy_in_ns;
  const Nanos out_start = now_;
  if (absl::Status status = CopyOut(); !status.ok()) return status;
  now_ += BytesTime(out_bytes, config_.host_copy_bytes_per_second);
  result_.copy_out_ns = now_ - out_start;
  result_.time_ns = now_;

  for (auto& d : devices_) {
    d->stats.peak_frames = d->memory.peak_frames();
    result_.total.Add(d->stats);
    result_.devices.push_back(d->stats);
    result_.policy_table_bytes += d->policy->TableBytes();
  }
  devices_[0]->policy->ReportStats(result_.policy_stats);
  if (audit_ != nullptr) result_.invariant_checks = audit_->checks();
  return result_;
}

}  // namespace umlab::snurhac::internal
