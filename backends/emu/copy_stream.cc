#include "backends/emu/copy_stream.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/block_range.h"
#include "core/policy.h"

namespace umlab {
namespace {

bool Overlaps(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a < b + b_size && b < a + a_size;
}

// Whether two device ranges share a page: a page awaits one copy at a
// time, so copies into neighbouring bytes of one page go one after the
// other.
bool SharePage(const CopyCommand& a, const CopyCommand& b) {
  const uint64_t a_first = PageOfAddress(a.device_address);
  const uint64_t b_first = PageOfAddress(b.device_address);
  return Overlaps(a_first, PagesSpanned(a.device_address, a.size), b_first,
                  PagesSpanned(b.device_address, b.size));
}

}  // namespace

absl::Status CopyStream::Issue(CopyId id, const CopyCommand& copy, CopyMode mode, Nanos now) {
  if (mode == CopyMode::kHostAccess) {
    return absl::InternalError("sim: a copy run as a host access reached the copy stream");
  }
  if (mode == CopyMode::kHidden && !copy.to_device()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy asks to hide copy %d, which goes device to host; hidden copies go host to "
        "device only",
        id));
  }
  Copy& entry = live_[id];
  entry.command = copy;
  entry.mode = mode;
  if (mode == CopyMode::kHidden) {
    ForEachBlockRange(copy.device_address, copy.size, false,
                      [&](BlockNumber block, const PageMask& pages) {
                        const uint64_t first = std::max(copy.device_address, block * kBlockSize);
                        const uint64_t end =
                            std::min(copy.device_address + copy.size, (block + 1) * kBlockSize);
                        entry.chunks.push_back(Chunk{block, pages, first, end - first});
                      });
  } else if (!copy.async) {
    ++sync_dma_live_;
  }
  last_copy_ = id;
  if (mover_ != nullptr && copy.to_device()) mover_->Issued(id, copy);
  return Pump(now);
}

bool CopyStream::Protects(uint64_t address, uint64_t size) const {
  for (const auto& [id, copy] : live_) {
    if (copy.command.to_device() &&
        Overlaps(address, size, copy.command.host_address, copy.command.size)) {
      return true;
    }
  }
  return false;
}

bool CopyStream::DmaTouches(uint64_t address, uint64_t size, bool write) const {
  for (const auto& [id, copy] : live_) {
    if (copy.mode != CopyMode::kDma) continue;
    const CopyCommand& c = copy.command;
    const uint64_t destination = c.to_device() ? c.device_address : c.host_address;
    const uint64_t source = c.to_device() ? c.host_address : c.device_address;
    if (Overlaps(address, size, destination, c.size) ||
        (write && Overlaps(address, size, source, c.size))) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<bool> CopyStream::MayLaunch(uint32_t exec_id, absl::Span<const Event> accesses,
                                           bool& early) {
  early = false;
  for (const auto& [id, copy] : live_) {
    if (copy.mode == CopyMode::kDma) return false;
    // Not before a hidden copy's destination awaits it, off the device:
    // until then the kernel could read a page the copy has yet to write.
    if (!copy.started ||
        !engine_->CopyDestinationOffDevice(copy.command.device_address, copy.command.size)) {
      return false;
    }
  }
  if (!last_copy_.has_value() || !live_.contains(*last_copy_)) return true;
  const CopyCommand& copy = live_.at(*last_copy_).command;
  EarlyLaunchQuery query;
  query.exec_id = exec_id;
  query.copy = *last_copy_;
  query.kernel_touches_copy =
      std::any_of(accesses.begin(), accesses.end(), [&](const Event& access) {
        return Overlaps(access.address, access.size, copy.device_address, copy.size);
      });
  if (!engine_->policy().LaunchesEarly(query)) return false;
  early = true;
  return true;
}

Nanos CopyStream::NextEventTime() const {
  return staging_.empty() ? kNever : staging_.begin()->first;
}

absl::Status CopyStream::ProcessStagingAt(Nanos now) {
  while (!staging_.empty() && staging_.begin()->first <= now) {
    const Staging done = staging_.begin()->second;
    staging_.erase(staging_.begin());
    live_.at(done.copy).staged.push_back(done.chunk);
  }
  return Pump(now);
}

absl::Status CopyStream::OnChunkStaged(CopyId id, size_t chunk, Nanos now) {
  --staging_by_mover_;
  live_.at(id).staged.push_back(chunk);
  return Pump(now);
}

absl::Status CopyStream::OnTransfersComplete(absl::Span<const TransferId> completed, Nanos now) {
  for (TransferId id : completed) {
    if (id == landing_ && landing_ != 0) {
      landing_ = 0;
      Copy& copy = live_.at(landing_copy_);
      if (++copy.landed == copy.chunks.size()) Finish(landing_copy_);
    } else if (auto dma = dma_copies_.find(id); dma != dma_copies_.end()) {
      const CopyId copy = dma->second;
      dma_copies_.erase(dma);
      Finish(copy);
    }
  }
  return Pump(now);
}

absl::Status CopyStream::CheckNoBlankPages(const DeviceMemory& device) const {
  for (const auto& [id, copy] : live_) {
    if (copy.mode != CopyMode::kHidden || !copy.started) continue;
    for (const Chunk& chunk : copy.chunks) {
      const PageMask blank = device.Mapped(chunk.block) & engine_->AwaitingCopy(chunk.block);
      if (blank.any()) {
        return absl::InternalError(absl::StrFormat(
            "blank page: block %#x has %d pages mapped on the device that copy %d has yet to "
            "land, which a kernel could read before their data",
            chunk.block * kBlockSize, blank.count(), id));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CopyStream::Pump(Nanos now) {
  for (;;) {
    bool moved = StartNext(now);
    moved = StageNext(now) || moved;
    absl::StatusOr<bool> landed = LandNext();
    if (!landed.ok()) return landed.status();
    if (!engine_->health().ok()) return engine_->health();
    if (!moved && !*landed) return absl::OkStatus();
  }
}

bool CopyStream::StartNext(Nanos now) {
  // Copies start in program order: find the first one not started.
  auto next = std::find_if(live_.begin(), live_.end(),
                           [](const auto& entry) { return !entry.second.started; });
  if (next == live_.end()) return false;
  const CopyId id = next->first;
  Copy& copy = next->second;
  const CopyCommand& command = copy.command;
  if (copy.mode == CopyMode::kDma) {
    if (next != live_.begin()) return false;  // after every copy before it
    RunStats& stats = engine_->mutable_stats();
    (command.to_device() ? stats.dma_h2d_bytes : stats.dma_d2h_bytes) += command.size;
    copy.started = true;
    if (mover_ != nullptr) {
      dma_copies_.emplace(mover_->StartDma(id, command), id);
      return true;
    }
    LinkTransfer dma;
    dma.id = next_dma_++;
    dma.direction =
        command.to_device() ? LinkDirection::kHostToDevice : LinkDirection::kDeviceToHost;
    dma.bytes = command.size;
    dma.ready_ns = now;
    dma.evicts_for_room = false;
    dma.dma = true;
    link_->Submit(dma, now);
    dma_copies_.emplace(dma.id, id);
    return true;
  }
  // A hidden copy: its pages can await one copy at a time.
  std::vector<CopyId> earlier;
  for (auto it = live_.begin(); it != next; ++it) {
    if (SharePage(command, it->second.command)) return false;
    // Its source is the data an earlier copy back to the host is writing.
    const CopyCommand& before = it->second.command;
    if (!before.to_device() &&
        Overlaps(command.host_address, command.size, before.host_address, before.size)) {
      return false;
    }
    earlier.push_back(it->first);
  }
  if (!engine_->policy().StartsCopy(id, earlier)) return false;
  engine_->AwaitCopy(command.device_address, command.size);
  for (size_t chunk = 0; chunk < copy.chunks.size(); ++chunk) {
    to_stage_.push_back(Staging{id, chunk});
  }
  copy.started = true;
  return true;
}

bool CopyStream::StageNext(Nanos now) {
  const size_t threads = static_cast<size_t>(std::max(1, engine_->policy().CopyThreads()));
  bool moved = false;
  while (staging_.size() + staging_by_mover_ < threads && !to_stage_.empty()) {
    const Staging next = to_stage_.front();
    const Chunk& chunk = live_.at(next.copy).chunks[next.chunk];
    // The threads write the destination in host memory: not while the
    // device still holds it.
    if (!engine_->CopyDestinationOffDevice(chunk.address, chunk.bytes)) break;
    // The threads at work from now on, this one among them.
    const size_t busy =
        std::min(threads, staging_.size() + staging_by_mover_ + to_stage_.size());
    to_stage_.pop_front();
    const Nanos time = StagingTime(chunk.bytes, busy);
    if (mover_ != nullptr) {
      const CopyCommand& command = live_.at(next.copy).command;
      ++staging_by_mover_;
      mover_->Stage(next.copy, next.chunk, chunk.address,
                    command.host_address + (chunk.address - command.device_address), chunk.bytes,
                    time);
    } else {
      staging_.emplace(now + time, next);
    }
    moved = true;
  }
  return moved;
}

absl::StatusOr<bool> CopyStream::LandNext() {
  if (landing_ != 0) return false;
  std::vector<CopyId> waiting;
  for (const auto& [id, copy] : live_) {
    if (!copy.staged.empty()) waiting.push_back(id);
  }
  if (waiting.empty()) return false;
  const CopyId chosen = engine_->policy().NextCopyToMigrate(waiting);
  if (!std::binary_search(waiting.begin(), waiting.end(), chosen)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the policy names copy %d for the migration thread, which has no staged chunk "
        "waiting",
        chosen));
  }
  Copy& copy = live_.at(chosen);
  const Chunk& chunk = copy.chunks[copy.staged.front()];
  const std::optional<TransferId> landing = engine_->LandCopy(chunk.block, chunk.pages);
  if (!landing.has_value()) return false;  // no frame now: again when one may be free
  copy.staged.pop_front();
  if (*landing != 0) {
    landing_ = *landing;
    landing_copy_ = chosen;
  } else if (++copy.landed == copy.chunks.size()) {
    Finish(chosen);  // the program freed what was left to land
  }
  return true;
}

void CopyStream::Finish(CopyId id) {
  const Copy& copy = live_.at(id);
  if (copy.mode == CopyMode::kDma && !copy.command.async) --sync_dma_live_;
  const CopyCommand command = copy.command;
  live_.erase(id);
  if (mover_ != nullptr && command.to_device()) mover_->Done(id, command);
}

Nanos CopyStream::StagingTime(uint64_t bytes, size_t busy) const {
  const double rate =
      device_.host_stage_bytes_per_second /
      (1.0 + device_.host_stage_contention * (static_cast<double>(std::max<size_t>(busy, 1)) - 1.0));
  return static_cast<Nanos>(std::ceil(static_cast<double>(bytes) * 1e9 / rate));
}

}  // namespace umlab
