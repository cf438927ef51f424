// The report of `run`, `record`, `replay` and `compare`: their runs as a
// table, the JSON contract (docs/json-contract.md) or CSV. One renderer per
// file (report_table.cc, report_json.cc, report_csv.cc), listed once in
// RunFormats().
#ifndef UMLAB_CLI_REPORT_H_
#define UMLAB_CLI_REPORT_H_

#include <string>
#include <vector>

#include "cli/json_text.h"
#include "cli/output_format.h"
#include "cli/runner/experiment.h"

namespace umlab::cli {

using Runs = std::vector<RunResult>;

// The formats the runs can be printed in; the first is the default.
const FormatList<Runs>& RunFormats();

// The renderers RunFormats() lists.
std::string RunsTable(const Runs& runs);
std::string RunsJson(const Runs& runs);
std::string RunsCsv(const Runs& runs);

// The scalar keys of one run, in contract order: the JSON object without
// its lists and `policy_stats`, and the CSV's columns. Names are the contract.
Json RunScalars(const RunResult& run);

// One CSV cell (RFC 4180): a string is quoted, its quotes doubled, so commas
// (policy specs have them) and line breaks stay inside the cell. Numbers are
// bare.
std::string CsvCell(const Json& value);

// Mean of a per-iteration quantity over the steady state: every iteration but
// the first (all of them if there is only one).
double SteadyStateMean(const RunStats& stats, uint64_t IterationStats::*field);
double SteadyStateMeanTime(const RunStats& stats);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_REPORT_H_
