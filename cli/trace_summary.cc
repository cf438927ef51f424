#include "cli/trace_summary.h"

#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "cli/json_contract.h"
#include "cli/json_text.h"
#include "core/byte_size.h"
#include "core/copy_command.h"
#include "core/trace_reader.h"

namespace umlab::cli {

absl::StatusOr<TraceSummary> SummarizeTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceSummary summary;
  summary.file = path;
  summary.version = (*reader)->version();
  summary.metadata = (*reader)->metadata();
  absl::flat_hash_set<uint32_t> kernel_ids;
  Event event;
  while ((*reader)->Next(event)) {
    ++summary.events[EventKindName(event.kind)];
    switch (event.kind) {
      case EventKind::kFault: ++summary.faults; break;
      case EventKind::kMigrate: summary.migrated_bytes += event.size; break;
      case EventKind::kEvict: summary.written_back_bytes += event.size; break;
      case EventKind::kAccess:
        summary.page_accesses += PagesSpanned(event.address, event.size);
        break;
      case EventKind::kIterationBegin: ++summary.iterations; break;
      case EventKind::kKernelBegin: ++summary.kernels; break;
      case EventKind::kKernelDefine: kernel_ids.insert(event.exec_id); break;
      case EventKind::kCopy:
        if (absl::StatusOr<CopyCommand> copy = CopyOf(event); copy.ok()) {
          (copy->to_device() ? summary.copied_in_bytes : summary.copied_out_bytes) += copy->size;
        }
        break;
      default: break;
    }
  }
  if (!(*reader)->status().ok()) return (*reader)->status();
  summary.distinct_kernels = kernel_ids.size();
  return summary;
}

const FormatList<TraceSummary>& TraceSummaryFormats() {
  static const auto* formats = new FormatList<TraceSummary>{
      {"table", "a summary to read", TraceSummaryText},
      {"json", "the same as one JSON object", TraceSummaryJson},
  };
  return *formats;
}

std::string TraceSummaryText(const TraceSummary& s) {
  std::string out = absl::StrFormat("%s: umt version %d\n", s.file, s.version);
  for (const auto& [key, value] : s.metadata) {
    absl::StrAppendFormat(&out, "  %-16s %s\n", key, value);
  }
  out += "events:\n";
  for (const auto& [kind, count] : s.events) {
    absl::StrAppendFormat(&out, "  %-16s %d\n", kind, count);
  }
  absl::StrAppendFormat(&out,
                        "%d iterations, %d kernels (%d distinct), %d page accesses\n"
                        "recorded: %d faults, %s migrated, %s written back\n",
                        s.iterations, s.kernels, s.distinct_kernels, s.page_accesses, s.faults,
                        FormatBytes(s.migrated_bytes), FormatBytes(s.written_back_bytes));
  if (s.copied_in_bytes + s.copied_out_bytes > 0) {
    absl::StrAppendFormat(&out, "copies: %s to the device, %s back\n",
                          FormatBytes(s.copied_in_bytes), FormatBytes(s.copied_out_bytes));
  }
  return out;
}

std::string TraceSummaryJson(const TraceSummary& s) {
  Json metadata = Json::object();
  for (const auto& [key, value] : s.metadata) metadata[key] = value;
  Json events = Json::object();
  for (const auto& [kind, count] : s.events) events[kind] = count;
  Json out = VersionedJsonObject();
  out.update(Json{{"file", s.file},
                  {"version", s.version},
                  {"metadata", metadata},
                  {"events", events},
                  {"iterations", s.iterations},
                  {"kernels", s.kernels},
                  {"distinct_kernels", s.distinct_kernels},
                  {"page_accesses", s.page_accesses},
                  {"faults", s.faults},
                  {"migrated_bytes", s.migrated_bytes},
                  {"written_back_bytes", s.written_back_bytes},
                  {"copied_in_bytes", s.copied_in_bytes},
                  {"copied_out_bytes", s.copied_out_bytes}});
  return JsonText(out) + "\n";
}

}  // namespace umlab::cli
