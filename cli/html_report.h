// `umlab report` and `compare --report`: runs as one self-contained HTML
// page (docs/report.md). Inline SVG only, tooltips as SVG <title>s: no
// script, no stylesheet or font from elsewhere, so the file reads the same
// opened from disk on a machine with no network.
//
// Runs are grouped by workload, device, backend and capacity; in each group
// the first run is the baseline for speedups. Per group, in order:
//   comparison    a table: time, speedup, steady iteration, stall, faults,
//                 traffic, prefetch usefulness and lateness
//   iterations    per-iteration time with its stall, per policy
//   kernel-faults faults per kernel of the last iteration, per policy,
//                 kernel names on hover                         (series)
//   residency     device memory over time: resident, in flight, prefetched
//                 and unused, inactive; the capacity as a line  (series)
//   link          link use per direction over time: fault migrations and
//                 prefetches host to device, write-backs back   (series)
//   prefetch      prefetched bytes used and unused, and the share of
//                 faulted pages that were already in flight (late)
// Pictures marked (series) need the runs' optional `series` object
// (`--series`); without it the page says so in their place. Traces given
// with the runs get a section each after the groups (cli/report_traces.h).
#ifndef UMLAB_CLI_HTML_REPORT_H_
#define UMLAB_CLI_HTML_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/report_input.h"
#include "cli/report_traces.h"

namespace umlab::cli {

// The names of the pictures each group has, in page order (data-plot).
const std::vector<std::string>& ReportPlotNames();

std::string RenderHtmlReport(const std::vector<ReportRun>& runs,
                             const std::vector<ReportTrace>& traces = {});

// Writes the page to `path` (through `path`.tmp, renamed when complete).
absl::Status WriteHtmlReport(const std::vector<ReportRun>& runs,
                             const std::vector<ReportTrace>& traces, const std::string& path);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_HTML_REPORT_H_
