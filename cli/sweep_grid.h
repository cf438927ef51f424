// A sweep's grid: axes of `umlab run` (or `replay`) options and fixed
// options, expanded into cases, one self-contained command line each.
//
//   {
//     "fixed": {"workload-arg": ["iterations=3"], "backend": "sim"},
//     "axes": {
//       "workload": ["mlp", "gpt2-small"],
//       "workload-arg:batch": [128, 256],      // --workload-arg batch=128, ...
//       "policy": ["demand", "deepum"],
//       "policy-param:rows": [1024, 2048],     // deepum:rows=1024, ...
//       "capacity": [0.25, 0.5],
//       "device": ["v100-pcie3", "h200"]
//     },
//     "slurm": {"max_running": 50, "args": ["--partition=cpu"]}
//   }
//
// A key names an option of `umlab run`: workload, trace (runs `umlab replay`
// instead; relative paths are taken from the grid file's folder),
// workload-arg, device, device-param, backend, policy, capacity, replay; and
// workload-arg:K, device-param:K, policy-param:K, whose values V become
// K=V (policy-param extends the policy spec). A value is a string or a
// number; a fixed workload-arg or device-param may be a list. The cases are
// the cartesian product of the axes, the first axis varying slowest.
//
// A case's name is a readable slug of its axis values and a hash of its
// whole argument list, so it is stable (the axes' order in the file does not
// change it), safe in a file name, and distinct for distinct arguments.
#ifndef UMLAB_CLI_SWEEP_GRID_H_
#define UMLAB_CLI_SWEEP_GRID_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace umlab::cli {

// One key of a grid with its values: an axis, or a fixed option.
struct GridKey {
  std::string key;  // as written: "policy", "workload-arg:batch"
  std::vector<std::string> values;
};

// The "slurm" member: how the generated batch scripts ask for resources.
struct SlurmSettings {
  int max_running = 100;          // the K of --array=0-N%K
  std::vector<std::string> args;  // extra sbatch options, e.g. --partition=cpu
  std::string time;               // --time for every case; empty: estimated
  std::string mem;                // --mem for every case; empty: estimated
};

struct Grid {
  std::vector<GridKey> fixed;
  std::vector<GridKey> axes;  // in file order
  SlurmSettings slurm;
};

// What one case runs: the options of `umlab run` (or `replay` of `trace`).
// Empty strings are options left to umlab's defaults.
struct CaseSpec {
  std::string workload;
  std::string trace;  // absolute
  std::vector<std::string> workload_args;
  std::string device;
  std::vector<std::string> device_params;
  std::string backend;
  std::string policy;
  std::vector<std::string> policy_params;
  std::string capacity;
  std::string replay;

  // The policy spec with the policy-param values folded in; "" if neither.
  std::string PolicySpec() const;
};

struct SweepCase {
  std::string name;  // slug-hash, the stem of its result file
  // The case's place in the grid: axis key and value, in the axes' order.
  std::vector<std::pair<std::string, std::string>> coordinates;
  CaseSpec spec;
  // The umlab arguments (after the program name), ending in --format=json.
  std::vector<std::string> args;
};

// Parses and checks a grid's text: JSON syntax, known keys, no empty axis,
// no value twice in an axis, a workload or a trace. `path` names the grid
// in errors, whose messages are one line; relative traces are resolved
// against its folder.
absl::StatusOr<Grid> ParseGrid(const std::string& path, const std::string& text);

// Every case of the grid, in grid order.
std::vector<SweepCase> ExpandGrid(const Grid& grid);

// `text` as one shell word: unchanged when it holds only safe characters,
// otherwise in single quotes.
std::string ShellQuote(const std::string& text);

// 64-bit FNV-1a: stable across runs and machines (absl::Hash is not).
uint64_t StableHash(const std::string& text);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SWEEP_GRID_H_
