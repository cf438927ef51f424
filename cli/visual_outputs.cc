#include "cli/visual_outputs.h"

#include "absl/strings/str_cat.h"
#include "cli/html_report.h"
#include "cli/output_file.h"
#include "cli/report_input.h"
#include "cli/timeline_json.h"
#include "cli/trace_timeline.h"

namespace umlab::cli {

OptionSpec SeriesOption() {
  return {"series", "",
          "add each run's statistics over time (residency, link use, faults per kernel) to "
          "--format=json as its `series` (docs/json-contract.md)"};
}

OptionSpec ReportOption() {
  return {"report", "FILE.html",
          "also write the runs as one self-contained HTML report (implies --series)"};
}

OptionSpec TimelineOption() {
  return {"timeline", "FILE.json",
          "also write the run as Chrome trace-event JSON for Perfetto or chrome://tracing"};
}

std::vector<OptionSpec> ReportCommandOptions() {
  return {{"output", "FILE.html", "the page to write (written to FILE.tmp, then renamed)"},
          {"trace", "FILE.umt",
           "also draw a .umt trace's faults and link traffic over time (by issue time)", "",
           true}};
}

std::vector<OptionSpec> TimelineCommandOptions() {
  return {{"output", "FILE.json", "the trace-event JSON to write (FILE.tmp, then renamed)"}};
}

absl::Status ReportFromFiles(const std::vector<std::string>& paths,
                             const std::vector<std::string>& traces, const std::string& output) {
  std::vector<ReportRun> runs;
  for (const std::string& path : paths) {
    absl::StatusOr<std::vector<ReportRun>> read = ReadReportRuns(path);
    if (!read.ok()) return read.status();
    for (ReportRun& run : *read) runs.push_back(std::move(run));
  }
  std::vector<ReportTrace> drawn;
  for (const std::string& path : traces) {
    absl::StatusOr<ReportTrace> read = ReadReportTrace(path);
    if (!read.ok()) return read.status();
    drawn.push_back(*std::move(read));
  }
  return WriteHtmlReport(runs, drawn, output);
}

absl::Status ReportFromRuns(const Runs& runs, const std::string& output) {
  absl::StatusOr<std::vector<ReportRun>> read = ParseReportRuns(RunsJson(runs), "this compare");
  if (!read.ok()) return read.status();
  return WriteHtmlReport(*read, {}, output);
}

absl::Status TimelineFromTraceFile(const std::string& trace, const std::string& output) {
  absl::StatusOr<TraceTimeline> read = TimelineFromTrace(trace);
  if (!read.ok()) return read.status();
  std::vector<std::pair<std::string, std::string>> metadata = read->metadata;
  metadata.emplace_back("source", trace);
  return WriteOutputFile(output, "timeline", [&](std::ostream& out) {
    WriteTimelineJson(read->timeline, metadata, out);
  });
}

absl::Status TimelineFromRun(const RunResult& run, const std::string& output) {
  const std::vector<std::pair<std::string, std::string>> metadata = {
      {"workload", run.workload},
      {"policy", run.policy},
      {"backend", run.backend},
      {"device", run.device},
      {"capacity_bytes", absl::StrCat(run.capacity_bytes)},
      {"time_ns", absl::StrCat(run.stats.time_ns)},
      {"h2d_bytes", absl::StrCat(run.stats.h2d_bytes)},
      {"d2h_bytes", absl::StrCat(run.stats.d2h_bytes)},
      {"kernels", absl::StrCat(run.stats.kernels)},
      {"fault_batches", absl::StrCat(run.stats.fault_batches)},
      {"faults", absl::StrCat(run.stats.faults)},
  };
  return WriteOutputFile(output, "timeline", [&](std::ostream& out) {
    WriteTimelineJson(*run.timeline, metadata, out);
  });
}

}  // namespace umlab::cli
