#include "backends/cuda/replay_plan.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/kernel_assembler.h"
#include "core/memory_units.h"

namespace umlab::cuda {
namespace {

// Sorts and merges overlapping or touching ranges.
std::vector<PlannedSegment> MergeSegments(std::vector<PlannedSegment> reserved) {
  std::sort(reserved.begin(), reserved.end(),
            [](const PlannedSegment& a, const PlannedSegment& b) { return a.address < b.address; });
  std::vector<PlannedSegment> merged;
  for (const PlannedSegment& segment : reserved) {
    if (segment.size == 0) continue;
    if (!merged.empty() && segment.address <= merged.back().address + merged.back().size) {
      PlannedSegment& last = merged.back();
      last.size = std::max(last.address + last.size, segment.address + segment.size) - last.address;
    } else {
      merged.push_back(segment);
    }
  }
  return merged;
}

// Whether [address, address + size) lies inside one of `segments` (sorted,
// disjoint).
bool Covered(const std::vector<PlannedSegment>& segments, uint64_t address, uint64_t size) {
  auto it = std::upper_bound(segments.begin(), segments.end(), address,
                             [](uint64_t a, const PlannedSegment& s) { return a < s.address; });
  if (it == segments.begin()) return false;
  --it;
  return address + size <= it->address + it->size;
}

}  // namespace

uint64_t ReplayPlan::total_accesses() const {
  uint64_t total = 0;
  for (const PlannedKernel& kernel : kernels) total += kernel.accesses;
  return total;
}

absl::StatusOr<ReplayPlan> BuildReplayPlan(EventSource& program, bool keep_kernel_events) {
  ReplayPlan plan;
  std::vector<PlannedSegment> reserved;
  uint64_t events_since_kernel = 0;
  KernelAssembler assembler(program);
  while (assembler.Next()) {
    if (!assembler.is_kernel()) {
      const Event& event = assembler.event();
      if (event.kind == EventKind::kCopy) {
        return absl::UnimplementedError(
            "cuda: the program copies between host and device buffers, which this backend "
            "does not replay yet; run it on --backend=sim");
      }
      if (event.kind == EventKind::kAlloc && event.size > 0) {
        // Whole pages: the GPU faults and migrates nothing smaller.
        const uint64_t first = PageOfAddress(event.address) * kPageSize;
        reserved.push_back({first, PagesSpanned(event.address, event.size) * kPageSize});
      }
      plan.between.push_back(event);
      ++events_since_kernel;
      continue;
    }
    PlannedKernel kernel;
    kernel.begin = assembler.kernel_begin();
    kernel.end = assembler.kernel_end();
    kernel.on_host = assembler.kernel_on_host();
    if (kernel.on_host) ++plan.host_kernels;
    kernel.first_range = plan.ranges.size();
    kernel.first_event = plan.between.size() - events_since_kernel;
    kernel.event_count = events_since_kernel;
    events_since_kernel = 0;
    for (const Event& access : assembler.accesses()) {
      if (access.size == 0) continue;
      const PlannedRange range{PageOfAddress(access.address),
                               PagesSpanned(access.address, access.size),
                               access.access != AccessType::kRead};
      kernel.accesses += range.pages;
      // Adjacent accesses of one kind are one run: fewer entries to upload
      // and the same pages in the same order.
      if (plan.ranges.size() > kernel.first_range) {
        PlannedRange& last = plan.ranges.back();
        if (last.write == range.write && last.first_page + last.pages == range.first_page) {
          last.pages += range.pages;
          continue;
        }
      }
      plan.ranges.push_back(range);
    }
    kernel.range_count = plan.ranges.size() - kernel.first_range;
    if (keep_kernel_events) {
      const auto events = assembler.kernel_events();
      kernel.events.assign(events.begin(), events.end());
    }
    plan.kernels.push_back(std::move(kernel));
  }
  if (!assembler.status().ok()) return assembler.status();
  plan.trailing_events = events_since_kernel;

  plan.segments = MergeSegments(std::move(reserved));
  for (const PlannedSegment& segment : plan.segments) plan.segment_bytes += segment.size;
  for (const PlannedKernel& kernel : plan.kernels) {
    for (uint64_t i = kernel.first_range; i < kernel.first_range + kernel.range_count; ++i) {
      const PlannedRange& range = plan.ranges[i];
      if (!Covered(plan.segments, range.first_page * kPageSize, range.pages * kPageSize)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "malformed program: kernel %d touches %#x, outside every reserved segment",
            kernel.begin.exec_id, range.first_page * kPageSize));
      }
    }
  }
  return plan;
}

}  // namespace umlab::cuda
