// `umlab report --trace=FILE.umt`: what a `.umt` trace stamped with a time,
// drawn beside the runs. A trace (docs/trace-format.md) times each fault and
// each transfer when it was issued, so its section shows faults and link
// traffic by issue time, the view a trace recorded on any backend (the GPU's
// included) gives without its run's JSON.
#ifndef UMLAB_CLI_REPORT_TRACES_H_
#define UMLAB_CLI_REPORT_TRACES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/trace_timeline.h"

namespace umlab::cli {

struct ReportTrace {
  std::string source;
  TraceTimeline trace;
};

// Reads the whole trace; a damaged one is an error.
absl::StatusOr<ReportTrace> ReadReportTrace(const std::string& path);

// The trace's section of the page: charts "trace-faults" and "trace-link".
std::string TraceSection(const ReportTrace& trace);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_REPORT_TRACES_H_
