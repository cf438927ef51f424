#include "core/program_summary.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/memory_units.h"

namespace umlab {

absl::StatusOr<ProgramSummary> SummarizeProgram(EventSource& program) {
  ProgramSummary summary;
  // Reserved segments may share a block at their edges, so count per block.
  absl::flat_hash_map<BlockNumber, uint32_t> reserved;
  absl::flat_hash_set<BlockNumber> touched;
  uint64_t peak_reserved = 0;
  bool saw_alloc = false;
  Event event;
  while (program.Next(event)) {
    ++summary.events;
    if (!event.IsProgramEvent()) {
      ++summary.observed_events;
      continue;
    }
    switch (event.kind) {
      case EventKind::kIterationBegin:
        ++summary.iterations;
        break;
      case EventKind::kKernelBegin:
        ++summary.kernels;
        summary.compute_ns += event.duration_ns;
        break;
      case EventKind::kAlloc:
      case EventKind::kFree: {
        if (event.size == 0) break;
        saw_alloc = true;
        const BlockNumber first = BlockOfAddress(event.address);
        const BlockNumber last = BlockOfAddress(event.address + event.size - 1);
        for (BlockNumber block = first; block <= last; ++block) {
          if (event.kind == EventKind::kAlloc) {
            ++reserved[block];
          } else if (auto it = reserved.find(block); it != reserved.end()) {
            if (--it->second == 0) reserved.erase(it);
          }
        }
        peak_reserved = std::max<uint64_t>(peak_reserved, reserved.size());
        break;
      }
      case EventKind::kAccess: {
        if (event.size == 0) break;
        summary.accessed_pages += PagesSpanned(event.address, event.size);
        if (!saw_alloc) {
          const BlockNumber first = BlockOfAddress(event.address);
          const BlockNumber last = BlockOfAddress(event.address + event.size - 1);
          for (BlockNumber block = first; block <= last; ++block) touched.insert(block);
        }
        break;
      }
      default:
        break;
    }
  }
  if (!program.status().ok()) return program.status();
  summary.footprint_bytes = (saw_alloc ? peak_reserved : touched.size()) * kBlockSize;
  return summary;
}

}  // namespace umlab
