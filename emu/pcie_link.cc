#include "emu/pcie_link.h"

#include <algorithm>
#include <cmath>

namespace umlab {

PcieLink::PcieLink(const LinkConfig& config) : config_(config) {}

Nanos PcieLink::Duration(LinkDirection direction, uint64_t bytes, bool evicts_for_room,
                         bool via_storage, bool storage_busy, bool fault_path) const {
  const bool to_device = direction == LinkDirection::kHostToDevice;
  // The fault path zero-filling: no copy, so no transfer set-up either.
  if (to_device && fault_path && bytes == 0) return config_.fault_block_overhead_ns;
  const double link = !to_device ? config_.d2h_bytes_per_second
                      : fault_path ? config_.fault_h2d_rate()
                                   : config_.h2d_bytes_per_second;
  const StorageConfig& storage = config_.storage;
  const double drive =
      to_device ? storage.read_bytes_per_second : storage.write_bytes_per_second;
  double bandwidth = link;
  Nanos latency = config_.latency_ns;
  if (via_storage) {
    bandwidth = std::min(link, drive);
    latency += to_device ? storage.read_latency_ns : storage.write_latency_ns;
  } else if (storage_busy) {
    // What the drive leaves of the link, and never less than a tenth of it.
    bandwidth = std::max(link - drive, link / 10);
  }
  const Nanos overhead = !to_device && evicts_for_room ? config_.eviction_overhead_ns
                         : to_device && fault_path     ? config_.fault_block_overhead_ns
                                                       : 0;
  return latency + overhead +
         static_cast<Nanos>(std::llround(static_cast<double>(bytes) * 1e9 / bandwidth));
}

Nanos PcieLink::DmaDuration(LinkDirection direction, uint64_t bytes) const {
  const double rate = direction == LinkDirection::kHostToDevice ? config_.dma_h2d_rate()
                                                                : config_.dma_d2h_rate();
  return config_.latency_ns +
         static_cast<Nanos>(std::llround(static_cast<double>(bytes) * 1e9 / rate));
}

Nanos PcieLink::RemoteDuration(LinkDirection direction, uint64_t bytes) const {
  const double rate = direction == LinkDirection::kHostToDevice ? config_.remote_read_rate()
                                                                : config_.remote_write_rate();
  return static_cast<Nanos>(std::llround(static_cast<double>(bytes) * 1e9 / rate));
}

int PcieLink::LaneOf(LinkDirection direction, bool via_storage) const {
  if (!config_.full_duplex) return 0;
  const int d = static_cast<int>(direction);
  return via_storage && has_storage() ? 2 + d : d;
}

bool PcieLink::FaultPathWorksWithoutBytes(LinkDirection direction, bool fault_path) const {
  return direction == LinkDirection::kHostToDevice && fault_path &&
         config_.fault_block_overhead_ns > 0;
}

int PcieLink::LaneOf(const LinkTransfer& transfer) const {
  const bool via_storage = transfer.storage_bytes > 0;
  if (transfer.prefetch_call && config_.prefetch_calls_beside_faults && !via_storage) {
    return kPrefetchCallLane;
  }
  return LaneOf(transfer.direction, via_storage);
}

int PcieLink::StorageLaneBeside(int lane) const {
  return config_.full_duplex && has_storage() && lane < 2 ? 2 + lane : -1;
}

void PcieLink::Submit(const LinkTransfer& transfer, Nanos now) {
  unfinished_.insert(transfer.id);
  if (transfer.after != 0 && unfinished_.contains(transfer.after)) {
    blocked_[transfer.after].push_back(transfer);
    return;
  }
  Enqueue(transfer, now);
}

void PcieLink::Enqueue(const LinkTransfer& transfer, Nanos now) {
  if (transfer.bytes == 0 && !transfer.populates &&
      !(transfer.fault_zero_fill &&
        FaultPathWorksWithoutBytes(transfer.direction, transfer.fault_path))) {
    instant_.emplace_back(std::max(now, transfer.ready_ns), transfer.id);
    return;
  }
  const int lane = LaneOf(transfer);
  LinkTransfer queued = transfer;
  queued.ready_ns = std::max(now, transfer.ready_ns);
  lanes_[lane].waiting[static_cast<int>(transfer.priority)].push_back(queued);
  StartNext(lane, now);
}

void PcieLink::StartNext(int lane_index, Nanos now) {
  Lane& lane = lanes_[lane_index];
  if (lane.active) return;
  for (auto& queue : lane.waiting) {
    if (queue.empty() || queue.front().ready_ns > now) continue;
    lane.current = queue.front();
    queue.pop_front();
    lane.active = true;
    const bool via_storage = lane.current.storage_bytes > 0 && has_storage();
    const int beside = StorageLaneBeside(lane_index);
    const bool storage_busy = beside >= 0 && lanes_[beside].active;
    const LinkTransfer& current = lane.current;
    Nanos duration;
    if (current.remote) {
      duration = RemoteDuration(current.direction, current.bytes);
    } else if (current.dma) {
      duration = DmaDuration(current.direction, current.bytes);
    } else {
      duration = Duration(current.direction, current.bytes, current.evicts_for_room,
                          via_storage, storage_busy, current.fault_path) +
                 (current.populates ? config_.populate_overhead_ns : 0);
    }
    lane.end_ns = now + duration;
    bytes_moved_[static_cast<int>(lane.current.direction)] += lane.current.bytes;
    busy_ns_[static_cast<int>(lane.current.direction)] += duration;
    return;
  }
}

Nanos PcieLink::LaneNextEvent(const Lane& lane) const {
  if (lane.active) return lane.end_ns;
  Nanos next = kNever;
  for (const auto& queue : lane.waiting) {
    if (!queue.empty()) next = std::min(next, queue.front().ready_ns);
  }
  return next;
}

Nanos PcieLink::NextEventTime() const {
  Nanos next = kNever;
  for (const Lane& lane : lanes_) next = std::min(next, LaneNextEvent(lane));
  for (const auto& [time, id] : instant_) next = std::min(next, time);
  return next;
}

void PcieLink::Complete(TransferId id, Nanos now, std::vector<TransferId>& completed) {
  unfinished_.erase(id);
  completed.push_back(id);
  auto it = blocked_.find(id);
  if (it == blocked_.end()) return;
  std::vector<LinkTransfer> released = std::move(it->second);
  blocked_.erase(it);
  for (const LinkTransfer& transfer : released) Enqueue(transfer, now);
}

void PcieLink::ProcessEventsAt(Nanos now, std::vector<TransferId>& completed) {
  // Completions can release dependents that are ready at once, so repeat
  // until nothing more happens at this instant.
  bool progress = true;
  while (progress) {
    progress = false;
    for (Lane& lane : lanes_) {
      if (lane.active && lane.end_ns <= now) {
        lane.active = false;
        Complete(lane.current.id, now, completed);
        progress = true;
      }
    }
    if (!instant_.empty()) {
      std::vector<std::pair<Nanos, TransferId>> due;
      auto split = std::stable_partition(instant_.begin(), instant_.end(),
                                         [now](const auto& item) { return item.first > now; });
      due.assign(split, instant_.end());
      instant_.erase(split, instant_.end());
      for (const auto& [time, id] : due) {
        Complete(id, now, completed);
        progress = true;
      }
    }
    for (int index = 0; index < static_cast<int>(lanes_.size()); ++index) {
      const bool was_active = lanes_[index].active;
      StartNext(index, now);
      if (!was_active && lanes_[index].active) progress = true;
    }
  }
}

bool PcieLink::idle() const { return unfinished_.empty(); }

}  // namespace umlab
