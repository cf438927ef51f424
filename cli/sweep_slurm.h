// The Slurm side of `umlab sweep`: what each case is expected to cost, and
// the job-array batch scripts that ask for it.
//
// One `sbatch --array` asks for one --time and one --mem for all its tasks,
// so cases are grouped into classes of equal requests (time and memory
// rounded up to powers of two) and each class becomes one array script over
// its own job list; `submit.sh` submits them all. An array holds at most
// kMaxArrayTasks tasks, Slurm's default MaxArraySize, so a large class is cut
// into several arrays.
#ifndef UMLAB_CLI_SWEEP_SLURM_H_
#define UMLAB_CLI_SWEEP_SLURM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/sweep_grid.h"
#include "core/program_summary.h"

namespace umlab::cli {

inline constexpr int kMaxArrayTasks = 1000;

// A case's expected wall time and peak memory on one core.
struct CaseCost {
  double seconds = 0;
  uint64_t bytes = 0;
  bool calibrated = true;  // false: not the sim backend, a rough guess
};

// From the program's page accesses and footprint (sweep_slurm.cc says where
// the per-access cost and the per-block memory come from).
CaseCost EstimateCost(const ProgramSummary& program, const std::string& backend);

// What a case asks Slurm for: its cost with a safety margin, rounded up to a
// power of two (minutes, MiB) so that cases fall into few classes.
struct SlurmRequest {
  int64_t minutes = 1;
  int64_t mib = 256;
  bool operator<(const SlurmRequest& o) const {
    return minutes != o.minutes ? minutes < o.minutes : mib < o.mib;
  }
};
SlurmRequest RequestFor(const CaseCost& cost);

// Writes `dir`/slurm/array-I.sbatch and array-I.jobs for each class and
// `dir`/slurm/submit.sh, which submits every array. `jobs[i]` is case i's
// command line and `requests[i]` what it asks for (settings.time and .mem,
// when given, replace the estimates). Returns one line per array, for the
// summary.
absl::StatusOr<std::vector<std::string>> WriteSlurmScripts(
    const std::string& dir, const std::vector<std::string>& jobs,
    const std::vector<SlurmRequest>& requests, const SlurmSettings& settings);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SWEEP_SLURM_H_
