// `umlab regress SUITE.json [--update]`: policy regression suites as a
// feature. A suite is a list of cases (workload, device, capacity, policy,
// backend) with expectations stated as upper bounds and tolerances:
//
//   {
//     "contract_version": "1.0",               // optional (cli/json_contract.h)
//     "tolerance": 0.02,                       // default for every bound
//     "defaults": {"device": "v100-pcie3", "capacity": "0.5", "backend": "sim"},
//     "cases": [
//       {"name": "mlp/deepum", "workload": "mlp",
//        "workload_args": ["iterations=3"], "policy": "deepum:n=16",
//        "expect": {"steady_faults_per_iteration": {"max": 8114},
//                   "time_ns": {"max": 2.3e8, "tolerance": 0.05}}}
//     ]
//   }
//
// A bound passes when measured <= max * (1 + tolerance). The command prints
// one row per bound with the delta against `max`, and exits 1 if any bound is
// exceeded or a case fails to run, 2 if the suite itself is unusable.
// `--update` runs every case and rewrites each `max` to the measured value
// (a case without `expect` gets the default metrics); tolerances are kept,
// and the file then carries this umlab's "contract_version". A suite of a
// newer major version is refused (exit 2).
#ifndef UMLAB_CLI_REGRESS_H_
#define UMLAB_CLI_REGRESS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/runner/progress.h"

namespace umlab::cli {

// The metrics a bound may name, in the order rows are printed.
const std::vector<std::string>& RegressMetrics();

struct RegressOutcome {
  int exit_code = 0;    // kExitOk, kExitFailure or kExitUsage
  std::string message;  // why, when exit_code is not kExitOk
};

// Parses and validates a suite's text (JSON syntax, structure, members,
// metric names, tolerances) without running anything: the number of cases,
// or InvalidArgument with a one-line message naming `path`. RunRegressSuite
// does the same first.
absl::StatusOr<int> CheckRegressSuite(const std::string& path, const std::string& text);

// Runs (and with `update`, rewrites) the suite at `path`, printing the table
// to `out`. Up to `jobs` cases run at once (see ExecuteRuns), reporting to
// `progress` when given; the line is finished before the table is printed.
RegressOutcome RunRegressSuite(const std::string& path, bool update, int jobs,
                               std::ostream& out, ProgressLine* progress = nullptr);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_REGRESS_H_
