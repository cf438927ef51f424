// Turning run results into what a person or a script reads: a table, the
// JSON contract (docs/json-contract.md), or CSV.
#ifndef UMLAB_CLI_REPORT_H_
#define UMLAB_CLI_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/runner/experiment.h"

namespace umlab::cli {

enum class OutputFormat { kTable, kJson, kCsv };

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text);

// Mean of a per-iteration quantity over the steady state: every iteration but
// the first (all of them if there is only one).
double SteadyStateMean(const RunStats& stats, uint64_t IterationStats::*field);
double SteadyStateMeanTime(const RunStats& stats);

std::string FormatRuns(const std::vector<RunResult>& runs, OutputFormat format);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_REPORT_H_
