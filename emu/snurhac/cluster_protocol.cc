#include <algorithm>
#include <map>
#include <utility>

#include "emu/snurhac/cluster_run.h"

namespace umlab::snurhac::internal {

// --- Fault service -------------------------------------------------------------

void ClusterRun::ScheduleService(Device& d, Nanos time) {
  if (d.servicing || d.service_scheduled) return;
  d.service_scheduled = true;
  At(time, [this, &d] { ServiceBatch(d); });
}

void ClusterRun::ServiceBatch(Device& d) {
  d.service_scheduled = false;
  if (d.servicing || d.faults.empty()) return;
  // Steps 1 and 2: fetch a batch, sort it by page and group it by block.
  std::vector<FaultEntry> raw(static_cast<size_t>(config_.device.fault_batch_size));
  raw.resize(d.faults.Fetch(absl::MakeSpan(raw)));
  d.servicing = true;
  ++d.stats.fault_batches;
  std::map<BlockNumber, FaultedPages> by_block;
  for (const FaultEntry& entry : raw) {
    FaultedPages& pages = by_block[BlockOfPage(entry.page)];
    (entry.access == AccessType::kRead ? pages.read : pages.write)
        .set(PageIndexInBlock(entry.page));
  }
  // The policy sees the faults adjacent-page prefetching does not serve.
  std::vector<FaultedBlock> visible;
  std::vector<FaultEntry> visible_raw;
  for (const auto& [block, pages] : by_block) {
    d.stats.faulted_pages += (pages.read | pages.write).count();
    if (config_.adjacent_prefetch && ReadOnly(block)) continue;
    visible.push_back(FaultedBlock{block, pages.read | pages.write, pages.write});
  }
  for (const FaultEntry& entry : raw) {
    if (!(config_.adjacent_prefetch && ReadOnly(BlockOfPage(entry.page))))
      visible_raw.push_back(entry);
  }
  if (!visible.empty()) {
    d.policy->OnFaultBatch(FaultBatch{now_, visible_raw, visible});
  }
  const uint64_t batch_id = next_batch_++;
  Batch& batch = batches_[batch_id];
  batch.device = d.index;
  for (const auto& [block, pages] : by_block) {
    const PageMask faulted = pages.read | pages.write;
    Job& job = NewJob(JobKind::kFault, d, block);
    job.pages = pages;
    job.batch = batch_id;
    if (config_.adjacent_prefetch && ReadOnly(block)) {
      // §6.5.2: a fault on a read-only block brings the whole block.
      job.adjacent = ArrayPages(block) & ~faulted;
    } else {
      job.expanded = d.policy->ExpandFault(block, faulted) & ArrayPages(block) & ~faulted;
    }
    job.pages.read |= job.adjacent | job.expanded;
    ++batch.outstanding;
    // The fault-handling latency runs from the fetch; then every block's
    // protocol starts at once (the pipelining of §6.3).
    const uint64_t id = job.id;
    At(now_ + config_.device.fault_latency_ns, [this, id] { EnqueueJob(*jobs_.at(id)); });
  }
  if (batch.outstanding == 0) FinishBatch(batch_id);
}

void ClusterRun::FinishBatch(uint64_t batch_id) {
  Device& d = *devices_[batches_.at(batch_id).device];
  batches_.erase(batch_id);
  // Step 12, UVM's BATCH_FLUSH: the buffer is flushed and every stalled
  // issuer retries; those whose pages are still missing fault again.
  d.faults.Flush();
  for (uint32_t issuer : d.stalled) ready_.push(Ready{now_ * kPicosPerNano, d.index, issuer});
  d.stalled.clear();
  d.servicing = false;
}

// --- The protocol ----------------------------------------------------------------

Job& ClusterRun::NewJob(JobKind kind, Device& d, BlockNumber block) {
  auto job = std::make_unique<Job>();
  job->id = next_job_++;
  job->kind = kind;
  job->device = d.index;
  job->block = block;
  Job& ref = *job;
  jobs_[ref.id] = std::move(job);
  return ref;
}

void ClusterRun::EnqueueJob(Job& job) {
  Device& d = *devices_[job.device];
  // A block with a job queued or running is no victim: its frame is in use.
  ++d.frames.Get(job.block).transfers_in_flight;
  std::deque<uint64_t>& queue = d.block_jobs[job.block];
  queue.push_back(job.id);
  if (queue.size() == 1) StartJob(job.id);
}

void ClusterRun::StartJob(uint64_t id) {
  Job& job = *jobs_.at(id);
  Device& d = *devices_[job.device];
  if (job.kind != JobKind::kEvict) {
    // Pages something else brought since the request are left out.
    job.pages.write &= ~d.Writable(job.block);
    job.pages.read &= ~d.memory.Mapped(job.block) & ~job.pages.write;
    if ((job.pages.read | job.pages.write).none()) {
      FinishJob(id);
      return;
    }
    const BlockState* state = d.frames.Find(job.block);
    if ((state == nullptr || !state->has_frame) && !ObtainFrame(d, job)) return;
  }
  ContinueJob(job);
}

bool ClusterRun::ObtainFrame(Device& d, Job& job) {
  if (d.frames.free_frames() > 0) {
    d.frames.ClaimFrame(d.frames.Get(job.block), now_);
    return true;
  }
  VictimQuery query;
  query.reason = job.kind == JobKind::kFault ? VictimReason::kFault : VictimReason::kPrefetch;
  query.for_block = job.block;
  const std::optional<BlockNumber> victim = d.policy->ChooseVictim(query);
  const BlockState* state = victim.has_value() ? d.frames.Find(*victim) : nullptr;
  if (state == nullptr || !state->Evictable()) {
    d.waiting_for_frame.push_back(job.id);
    return false;
  }
  ++d.stats.evictions;
  Job& eviction = NewJob(JobKind::kEvict, d, *victim);
  eviction.for_room = true;
  eviction.frame_for = job.id;
  EnqueueJob(eviction);
  return false;
}

void ClusterRun::ContinueJob(Job& job) { RequestLock(job); }

void ClusterRun::RequestLock(Job& job) {
  // Steps 3 to 5: the lock request goes to the descriptor's owner, which
  // grants it or queues the device.
  Device& d = *devices_[job.device];
  const uint64_t id = job.id;
  const BlockNumber block = job.block;
  const int owner_node = OwnerNode(block);
  Message(d.node, owner_node, [this, id, block, owner_node, &d] {
    absl::StatusOr<LockReply> reply = directory_.RequestLock(d.index, block);
    if (!reply.ok()) return Fail(reply.status());
    if (*reply == LockReply::kGranted) {
      Message(owner_node, d.node, [this, id] { OnLocked(id); });
    } else {
      ++d.stats.lock_waits;
      lock_waiters_[{block, d.index}] = id;
    }
  });
}

void ClusterRun::OnLocked(uint64_t id) {
  // Steps 6 and 7: the fault list (or the eviction notice) goes to the
  // owner, which updates the masks and answers with the page owners.
  Job& job = *jobs_.at(id);
  Device& d = *devices_[job.device];
  const int owner_node = OwnerNode(job.block);
  Message(d.node, owner_node, [this, id, owner_node, &d] {
    Job& locked = *jobs_.at(id);
    if (locked.kind == JobKind::kEvict) {
      // What the device maps now: its jobs on the block ran before this one.
      const PageMask mapped = d.memory.Mapped(locked.block);
      locked.evict = locked.for_room ? mapped : locked.evict & mapped;
      absl::StatusOr<EvictionPlan> plan = directory_.Evict(d.index, locked.block, locked.evict);
      if (!plan.ok()) return Fail(plan.status());
      locked.eviction = *std::move(plan);
    } else {
      absl::StatusOr<FaultPlan> plan =
          directory_.ResolveFaults(d.index, locked.block, locked.pages);
      if (!plan.ok()) return Fail(plan.status());
      locked.plan = *std::move(plan);
    }
    if (audit_ != nullptr) audit_->Touch(locked.block);
    Message(owner_node, d.node, [this, id] { Execute(id); });
  });
}

void ClusterRun::Execute(uint64_t id) {
  Job& job = *jobs_.at(id);
  if (job.kind == JobKind::kEvict) return ExecuteEviction(job);
  Device& d = *devices_[job.device];
  const FaultPlan& plan = job.plan;
  // Steps 8 and 9: page requests to the page owners, which downgrade
  // their write permission before they copy (coherence_actions.h). A
  // downgrade at a device that sends nothing is a message of its own.
  job.outstanding = 1;  // held until every request is out
  for (const Downgrade& downgrade : plan.downgrades) {
    const bool sends =
        std::any_of(plan.fetches.begin(), plan.fetches.end(),
                    [&](const snurhac::Fetch& f) { return f.from == downgrade.device; });
    if (sends) continue;
    ++job.outstanding;
    Message(d.node, config_.NodeOf(downgrade.device), [this, id, downgrade] {
      ApplyDowngrade(downgrade);
      PieceDone(id);
    });
  }
  for (const snurhac::Fetch& fetch : plan.fetches) {
    ++job.outstanding;
    Message(d.node, NodeOfHolder(fetch.from), [this, id, fetch] { FetchPages(id, fetch); });
  }
  PieceDone(id);
}

void ClusterRun::FetchPages(uint64_t id, const snurhac::Fetch& fetch) {
  Job& job = *jobs_.at(id);
  Device& d = *devices_[job.device];
  for (const Downgrade& downgrade : job.plan.downgrades) {
    if (downgrade.device == fetch.from) ApplyDowngrade(downgrade);
  }
  if (audit_ != nullptr) {
    for (int index = 0; index < kPagesPerBlock; ++index) {
      if (!fetch.pages.test(index)) continue;
      const PageNumber page = FirstPageOfBlock(job.block) + index;
      absl::StatusOr<uint32_t> version = audit_->Send(fetch.from, page);
      if (!version.ok()) return Fail(version.status());
      job.versions[page] = *version;
    }
  }
  // Pages with no data yet (a fresh allocation the host never wrote) are
  // zero-filled at the device, as UVM populates a GPU's first touch: no
  // bytes move for them.
  PageMask copied = fetch.pages;
  if (fetch.from == kHost) {
    auto it = host_data_.find(job.block);
    copied &= it == host_data_.end() ? PageMask() : it->second;
    d.stats.zero_filled_bytes += MaskBytes(fetch.pages & ~copied);
  }
  const uint64_t bytes = MaskBytes(copied);
  if (bytes == 0) return PieceDone(id);
  (fetch.from == kHost ? d.stats.host_fetch_bytes : d.stats.peer_fetch_bytes) += bytes;
  const TransferKind priority =
      job.kind == JobKind::kFault ? TransferKind::kFaultMigration : TransferKind::kPrefetch;
  // Step 10's copy into the faulting device, at the end of the path.
  auto into_device = [this, id, bytes, priority, &d] {
    Transfer(d.link, LinkDirection::kHostToDevice, bytes, priority, false,
             [this, id] { PieceDone(id); });
  };
  const int source_node = NodeOfHolder(fetch.from);
  // Across nodes the pages cross the source node's network port (RDMA).
  auto across = [this, bytes, priority, source_node, into_device, &d] {
    if (source_node == d.node) return into_device();
    result_.network_bytes += bytes;
    SendOverNetwork(source_node, bytes, priority, into_device);
  };
  if (fetch.from == kHost) return across();
  // A device owner copies the pages out to its node's memory first (step 9).
  Transfer(devices_[fetch.from]->link, LinkDirection::kDeviceToHost, bytes, priority, false,
           across);
}

void ClusterRun::PieceDone(uint64_t id) {
  Job& job = *jobs_.at(id);
  if (--job.outstanding > 0) return;
  if (job.kind == JobKind::kEvict) return FinishEviction(job);
  Land(job);
}

void ClusterRun::Land(Job& job) {
  // Step 10: map the pages; then step 11, the unlock.
  Device& d = *devices_[job.device];
  const FaultPlan& plan = job.plan;
  const PageMask mapped = plan.map_read | plan.map_write;
  if (absl::Status status = d.memory.Map(job.block, mapped, PageMask()); !status.ok()) {
    return Fail(status);
  }
  if (plan.map_write.any()) d.writable[job.block] |= plan.map_write;
  PageMask fetched;
  for (const snurhac::Fetch& fetch : plan.fetches) fetched |= fetch.pages;
  d.stats.upgrades += (plan.map_write & ~fetched).count();
  BlockState& state = d.frames.Get(job.block);
  state.resident |= mapped;
  d.frames.TouchMigrated(state, now_);
  if (audit_ != nullptr) {
    for (const auto& [page, version] : job.versions) audit_->Landed(d.index, page, version);
    audit_->Touch(job.block);
  }
  if (job.kind == JobKind::kPrefetch) {
    (job.source == PrefetchSource::kStatic ? d.stats.static_prefetch_bytes
                                           : d.stats.policy_prefetch_bytes) += MaskBytes(fetched);
  } else {
    d.stats.adjacent_prefetch_bytes += MaskBytes(fetched & job.adjacent);
    d.stats.policy_prefetch_bytes += MaskBytes(fetched & job.expanded);
  }
  if (fetched.any()) {
    d.policy->OnMigrated(
        job.block, fetched,
        job.kind == JobKind::kFault ? TransferKind::kFaultMigration : TransferKind::kPrefetch);
  }
  Unlock(job);
  FinishJob(job.id);
}

void ClusterRun::ExecuteEviction(Job& job) {
  Device& d = *devices_[job.device];
  const EvictionPlan& plan = job.eviction;
  const uint64_t id = job.id;
  // The pages leave the device's page table before they are copied out.
  if (audit_ != nullptr) {
    for (int index = 0; index < kPagesPerBlock; ++index) {
      if (!plan.unmap.test(index)) continue;
      const PageNumber page = FirstPageOfBlock(job.block) + index;
      if (plan.write_back.test(index)) {
        audit_->LeavesForHost(d.index, page);
      } else {
        audit_->Dropped(d.index, page);
      }
    }
  }
  d.memory.Unmap(job.block, plan.unmap);
  if (auto it = d.writable.find(job.block); it != d.writable.end()) it->second &= ~plan.unmap;
  d.frames.Get(job.block).resident &= ~plan.unmap;
  job.outstanding = 1;
  // Readers of pages it wrote are unmapped before the lock goes.
  for (const Unmap& unmap : plan.unmaps) {
    ++job.outstanding;
    Message(d.node, config_.NodeOf(unmap.device), [this, id, unmap] {
      UnmapAt(unmap.device, unmap.block, unmap.pages);
      PieceDone(id);
    });
  }
  if (plan.write_back.any()) {
    ++job.outstanding;
    const uint64_t bytes = MaskBytes(plan.write_back);
    d.stats.write_back_bytes += bytes;
    const BlockNumber block = job.block;
    const PageMask pages = plan.write_back;
    // The host's copy lives on node 0.
    auto reached_host = [this, id, block, pages] {
      host_data_[block] |= pages;
      if (audit_ != nullptr) {
        for (int index = 0; index < kPagesPerBlock; ++index) {
          if (pages.test(index)) audit_->ReachedHost(FirstPageOfBlock(block) + index);
        }
      }
      PieceDone(id);
    };
    Transfer(d.link, LinkDirection::kDeviceToHost, bytes, TransferKind::kEviction, true,
             [this, bytes, reached_host, &d] {
               if (d.node == 0) return reached_host();
               result_.network_bytes += bytes;
               SendOverNetwork(d.node, bytes, TransferKind::kEviction, reached_host);
             });
  }
  PieceDone(id);
}

void ClusterRun::FinishEviction(Job& job) {
  Device& d = *devices_[job.device];
  d.policy->OnEvicted(job.block, job.eviction.unmap);
  Unlock(job);
  FinishJob(job.id);
}

void ClusterRun::Unlock(Job& job) {
  Device& d = *devices_[job.device];
  const BlockNumber block = job.block;
  const int owner_node = OwnerNode(block);
  Message(d.node, owner_node, [this, block, owner_node, &d] {
    absl::StatusOr<std::optional<int>> next = directory_.Unlock(d.index, block);
    if (!next.ok()) return Fail(next.status());
    if (!next->has_value()) return;
    const int waiter = **next;
    auto it = lock_waiters_.find({block, waiter});
    const uint64_t waiting = it->second;
    lock_waiters_.erase(it);
    Message(owner_node, config_.NodeOf(waiter), [this, waiting] { OnLocked(waiting); });
  });
}

void ClusterRun::FinishJob(uint64_t id) {
  std::unique_ptr<Job> job = std::move(jobs_.at(id));
  jobs_.erase(id);
  Device& d = *devices_[job->device];
  --d.frames.Get(job->block).transfers_in_flight;
  d.frames.NoteMayBeEvictable();
  // The block's next job starts now, before anything below may look for a
  // victim: a block with a job is none.
  std::deque<uint64_t>& queue = d.block_jobs[job->block];
  queue.pop_front();
  if (queue.empty()) {
    d.block_jobs.erase(job->block);
    ReleaseIdleFrame(d, job->block);
  } else {
    StartJob(queue.front());
  }
  if (job->kind == JobKind::kFault) {
    auto batch = batches_.find(job->batch);
    if (--batch->second.outstanding == 0) FinishBatch(job->batch);
  } else if (job->kind == JobKind::kPrefetch) {
    --d.prefetches_in_flight;
  } else if (job->frame_for != 0) {
    // The frame this eviction freed goes to the job that asked for it.
    Job& waiting = *jobs_.at(job->frame_for);
    if (ObtainFrame(d, waiting)) ContinueJob(waiting);
  }
  RetryFrameWaiters(d);
  PumpPrefetches(d);
}

void ClusterRun::ReleaseIdleFrame(Device& d, BlockNumber block) {
  BlockState* state = d.frames.FindMutable(block);
  if (state == nullptr || !state->has_frame || state->transfers_in_flight > 0) return;
  if (d.memory.Mapped(block).any()) return;
  d.frames.ReleaseFrame(*state);
}

void ClusterRun::RetryFrameWaiters(Device& d) {
  std::deque<uint64_t> waiting;
  waiting.swap(d.waiting_for_frame);
  for (uint64_t id : waiting) {
    Job& job = *jobs_.at(id);
    if (ObtainFrame(d, job)) ContinueJob(job);
  }
}

void ClusterRun::ApplyDowngrade(const Downgrade& downgrade) {
  Device& d = *devices_[downgrade.device];
  auto it = d.writable.find(downgrade.block);
  if (it != d.writable.end()) it->second &= ~downgrade.pages;
  d.stats.downgrades += downgrade.pages.count();
  if (audit_ != nullptr) audit_->Touch(downgrade.block);
}

void ClusterRun::UnmapAt(int device, BlockNumber block, const PageMask& pages) {
  Device& d = *devices_[device];
  if (audit_ != nullptr) {
    for (int index = 0; index < kPagesPerBlock; ++index) {
      if (pages.test(index)) audit_->Dropped(device, FirstPageOfBlock(block) + index);
    }
  }
  d.memory.Unmap(block, pages);
  if (auto it = d.writable.find(block); it != d.writable.end()) it->second &= ~pages;
  if (BlockState* state = d.frames.FindMutable(block)) state->resident &= ~pages;
  if (!d.block_jobs.contains(block)) ReleaseIdleFrame(d, block);
}

void ClusterRun::RequestPrefetch(int device, BlockNumber block, const FaultedPages& pages,
                                 PrefetchSource source) {
  Device& d = *devices_[device];
  if (!d.running) return;  // a prefetch outside a kernel is for nothing
  const PageMask inside = ArrayPages(block);
  const FaultedPages wanted{pages.read & inside, pages.write & inside};
  if ((wanted.read | wanted.write).none()) return;
  (source == PrefetchSource::kPolicy ? d.policy_queue : d.static_queue)
      .push_back(PrefetchRequest{block, wanted, source});
  PumpPrefetches(d);
}

void ClusterRun::PumpPrefetches(Device& d) {
  while (d.prefetches_in_flight < config_.prefetch_inflight_limit) {
    std::deque<PrefetchRequest>& queue = d.policy_queue.empty() ? d.static_queue : d.policy_queue;
    if (queue.empty()) return;
    const PrefetchRequest request = queue.front();
    queue.pop_front();
    FaultedPages pages = request.pages;
    pages.write &= ~d.Writable(request.block);
    pages.read &= ~d.memory.Mapped(request.block) & ~pages.write;
    if ((pages.read | pages.write).none()) continue;
    Job& job = NewJob(JobKind::kPrefetch, d, request.block);
    job.pages = pages;
    job.source = request.source;
    ++d.prefetches_in_flight;
    EnqueueJob(job);
  }
}

}  // namespace umlab::snurhac::internal
