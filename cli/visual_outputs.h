// The pictures a command can write besides its printed report: the HTML
// report (`umlab report`, `compare --report`) and the Chrome trace-event
// timeline (`umlab timeline`, `--timeline` on a run). cli/commands.cc holds
// only their options and calls these.
#ifndef UMLAB_CLI_VISUAL_OUTPUTS_H_
#define UMLAB_CLI_VISUAL_OUTPUTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/arguments.h"
#include "cli/report.h"

namespace umlab::cli {

// --series, --report and --timeline, for the commands that run.
OptionSpec SeriesOption();
OptionSpec ReportOption();
OptionSpec TimelineOption();

// The options of `umlab report` and `umlab timeline`.
std::vector<OptionSpec> ReportCommandOptions();
std::vector<OptionSpec> TimelineCommandOptions();

// `umlab report JSON... [--trace=FILE.umt]...`: reads every file (the JSON
// contract, the .umt format) and writes one page to `output`.
absl::Status ReportFromFiles(const std::vector<std::string>& paths,
                             const std::vector<std::string>& traces, const std::string& output);

// `compare --report=FILE`: the runs' JSON text, read back as a file would be.
absl::Status ReportFromRuns(const Runs& runs, const std::string& output);

// `umlab timeline FILE.umt --output=FILE.json`.
absl::Status TimelineFromTraceFile(const std::string& trace, const std::string& output);

// `--timeline=FILE` on a run: the run's recorded timeline.
absl::Status TimelineFromRun(const RunResult& run, const std::string& output);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_VISUAL_OUTPUTS_H_
