// `umlab sweep GRID.json`: a grid (cli/sweep_grid.h; GRID.yaml or .yml is
// read as YAML, cli/yaml_json.h) expanded into jobs for
// engines that already exist. umlab schedules nothing itself. It writes, in
// the results folder DIR:
//
//   DIR/jobs            one shell command line per case, for
//                       `parallel --joblog DIR/joblog < DIR/jobs`
//   DIR/slurm/          job-array batch scripts and submit.sh (sweep_slurm.h)
//   DIR/sweep.json      the manifest `umlab merge DIR` reads: each case's
//                       name, grid coordinates and command line
//
// Each command line changes to the folder sweep ran in and runs `umlab run
// ... --format=json` (or `replay`) for one case into DIR/cases/NAME.json.part.PID, renamed to NAME.json when the run
// succeeds; a failed run leaves its error in NAME.err and no NAME.json (a
// killed one only .part files). A
// line whose NAME.json exists does nothing, so running the jobs again, by
// any engine, resumes the sweep. `--run=local[:N]` runs the pending cases
// through GNU parallel here.
//
// Every case is checked (workload, trace, device, policy, backend, capacity)
// before anything is written, so a typo costs one line of error and no jobs.
#ifndef UMLAB_CLI_SWEEP_H_
#define UMLAB_CLI_SWEEP_H_

#include <ostream>
#include <string>

namespace umlab::cli {

struct SweepOptions {
  std::string grid_path;
  std::string results_dir;  // empty: the grid's path, its extension replaced by .sweep
  std::string run;          // empty, "local" or "local:N"
  std::string umlab;        // the binary the jobs run; empty: this one
};

struct SweepOutcome {
  int exit_code = 0;    // kExitOk, kExitFailure (a case failed) or kExitUsage
  std::string message;  // one line, when exit_code is not kExitOk
};

SweepOutcome RunSweep(const SweepOptions& options, std::ostream& out);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SWEEP_H_
