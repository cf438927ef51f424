#include "cli/trace_timeline.h"

#include "absl/strings/str_format.h"
#include "core/trace_reader.h"

namespace umlab::cli {

absl::StatusOr<TraceTimeline> TimelineFromTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceTimeline out;
  out.metadata = (*reader)->metadata();
  Timeline& timeline = out.timeline;
  uint64_t kernels = 0;
  Event event;
  while ((*reader)->Next(event)) {
    switch (event.kind) {
      case EventKind::kKernelDefine:
        timeline.kernel_names[event.exec_id] = event.name;
        break;
      case EventKind::kKernelBegin:
        ++kernels;
        break;
      case EventKind::kFault:
        timeline.faults.push_back(Timeline::Mark{event.time_ns, event.address, 0, event.exec_id});
        break;
      case EventKind::kMigrate:
      case EventKind::kEvict: {
        Timeline::TransferMark mark;
        mark.kind = event.kind == EventKind::kEvict
                        ? TransferKind::kEviction
                        : (event.cause == static_cast<uint8_t>(MigrationCause::kPrefetch)
                               ? TransferKind::kPrefetch
                               : TransferKind::kFaultMigration);
        mark.block = BlockOfPage(PageOfAddress(event.address));
        mark.bytes = event.size;
        mark.issued = mark.ready = event.time_ns;
        timeline.transfers.push_back(mark);
        break;
      }
      case EventKind::kInvalidate:
        timeline.invalidations.push_back(Timeline::Mark{event.time_ns, event.address, event.size, 0});
        break;
      default:
        break;
    }
  }
  if (!(*reader)->status().ok()) return (*reader)->status();
  timeline.notes.push_back(absl::StrFormat(
      "from the trace %s: its %d kernels, iterations and fault batches carry no times in the "
      ".umt format, and transfers are shown when issued (their landing is not recorded); run "
      "with --timeline=FILE for every track",
      path, kernels));
  return out;
}

}  // namespace umlab::cli
