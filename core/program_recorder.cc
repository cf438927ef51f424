#include "core/program_recorder.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "core/trace_writer.h"

namespace umlab {
namespace {

Event RangeEvent(EventKind kind, uint64_t address, uint64_t size) {
  Event e;
  e.kind = kind;
  e.address = address;
  e.size = size;
  return e;
}

// PyTorch's foreach kernels (torch._foreach_*, the optimizer step) update
// their tensor lists in place.
bool WritesEverythingItTouches(absl::string_view kernel_name) {
  return absl::StrContains(kernel_name, "multi_tensor_apply");
}

}  // namespace

std::map<uint64_t, ProgramRecorder::Range>::iterator ProgramRecorder::Holding(
    std::map<uint64_t, Range>& ranges, uint64_t address) {
  auto it = ranges.upper_bound(address);
  if (it == ranges.begin()) return ranges.end();
  --it;
  return address < it->second.end ? it : ranges.end();
}

void ProgramRecorder::OnSegment(bool allocated, uint64_t address, uint64_t bytes) {
  if (bytes == 0) return;
  if (allocated) {
    segments_[address] = Range{address + bytes, false};
    events_.push_back(RangeEvent(EventKind::kAlloc, address, bytes));
    return;
  }
  if (segments_.erase(address) == 0) return;
  // Blocks the allocator never reported free go with their segment.
  for (auto it = blocks_.lower_bound(address); it != blocks_.end() && it->first < address + bytes;
       it = blocks_.erase(it)) {
    events_.push_back(RangeEvent(EventKind::kDeactivate, it->first, it->second.end - it->first));
  }
  events_.push_back(RangeEvent(EventKind::kFree, address, bytes));
}

void ProgramRecorder::OnBlock(bool live, uint64_t address, uint64_t bytes) {
  if (bytes == 0) return;
  if (!live) {
    auto it = blocks_.find(address);
    if (it == blocks_.end()) return;  // never handed out while recording
    events_.push_back(RangeEvent(EventKind::kDeactivate, address, it->second.end - address));
    blocks_.erase(it);
    return;
  }
  auto segment = Holding(segments_, address);
  if (segment == segments_.end() || address + bytes > segment->second.end) {
    ++stats_.foreign_blocks;
    return;
  }
  blocks_[address] = Range{address + bytes, false};
  events_.push_back(RangeEvent(EventKind::kActivate, address, bytes));
}

void ProgramRecorder::OnIteration() {
  Event e;
  e.kind = EventKind::kIterationBegin;
  e.iteration = iterations_++;
  events_.push_back(e);
}

uint64_t ProgramRecorder::OnLaunch(uint32_t execution_id, absl::string_view name,
                                   absl::Span<const uint64_t> argument_words) {
  if (defined_.insert(execution_id).second) {
    Event define;
    define.kind = EventKind::kKernelDefine;
    define.exec_id = execution_id;
    define.name = std::string(name.substr(0, kMaxKernelNameBytes));
    if (define.name.empty()) define.name = "kernel";
    events_.push_back(std::move(define));
  }
  Event begin;
  begin.kind = EventKind::kKernelBegin;
  begin.exec_id = execution_id;
  launch_begin_.push_back(events_.size());
  events_.push_back(begin);

  const bool writes_all = WritesEverythingItTouches(name);
  std::vector<std::pair<uint64_t, uint64_t>> touched;
  auto touch = [&](uint64_t start, uint64_t end, bool write) {
    for (const auto& [s, e] : touched) {
      if (s == start) return;  // the same block through a second argument
    }
    touched.emplace_back(start, end);
    Event access = RangeEvent(EventKind::kAccess, start, end - start);
    access.exec_id = execution_id;
    access.access = write ? AccessType::kWrite : AccessType::kRead;
    events_.push_back(access);
    ++stats_.accesses;
    if (write) ++stats_.written_blocks;
  };
  for (uint64_t word : argument_words) {
    auto segment = Holding(segments_, word);
    if (segment == segments_.end()) continue;  // a scalar, or not our memory
    ++stats_.pointer_words;
    auto block = Holding(blocks_, word);
    if (block != blocks_.end()) {
      ++stats_.block_words;
      touch(block->first, block->second.end, writes_all || !block->second.touched);
      block->second.touched = true;
    } else {
      ++stats_.segment_words;
      touch(segment->first, segment->second.end, writes_all);
    }
  }
  if (touched.empty()) ++stats_.launches_without_access;
  Event end;
  end.kind = EventKind::kKernelEnd;
  end.exec_id = execution_id;
  events_.push_back(end);
  launch_blocks_.push_back(std::move(touched));
  ++stats_.launches;
  return launch_begin_.size() - 1;
}

void ProgramRecorder::SetDuration(uint64_t index, Nanos duration) {
  if (index >= launch_begin_.size()) return;
  Event& begin = events_[launch_begin_[index]];
  if (begin.duration_ns == 0 && duration > 0) ++stats_.timed_launches;
  begin.duration_ns = std::max<Nanos>(duration, 0);
}

AccessCoverage ProgramRecorder::Coverage(
    absl::Span<const std::pair<uint64_t, uint64_t>> faults) const {
  AccessCoverage coverage;
  for (const auto& [address, launch] : faults) {
    ++coverage.faults;
    if (launch >= launch_blocks_.size()) {
      ++coverage.outside_any_kernel;
      continue;
    }
    for (const auto& [start, end] : launch_blocks_[launch]) {
      if (address >= start && address < end) {
        ++coverage.explained;
        break;
      }
    }
  }
  return coverage;
}

absl::Status ProgramRecorder::Write(
    const std::string& path, std::vector<std::pair<std::string, std::string>> metadata) const {
  absl::StatusOr<std::unique_ptr<TraceWriter>> writer =
      TraceWriter::Create(path, std::move(metadata));
  if (!writer.ok()) return writer.status();
  for (const Event& e : events_) {
    if (absl::Status s = (*writer)->Append(e); !s.ok()) return s;
  }
  return (*writer)->Close();
}

}  // namespace umlab
