// SnuRHAC's cluster runs by name (`umlab snurhac`): a grid program from the
// registry (workloads/grid_workload.h), on 1 to 32 emulated devices, under
// one of the thesis's prefetching schemes (Figure 7.9), run by the cluster
// sim (emu/snurhac/cluster_sim.h).
#ifndef UMLAB_CLI_RUNNER_CLUSTER_STUDY_H_
#define UMLAB_CLI_RUNNER_CLUSTER_STUDY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/grid_program.h"
#include "emu/snurhac/cluster_config.h"
#include "emu/snurhac/cluster_sim.h"

namespace umlab::cli {

// What prefetches (§6.5, §7.3.2): SnuRHAC, SnuRHAC-SP and SnuRHAC-SP-DP are
// Figure 7.9's; DP alone is the ablation the thesis does not show.
enum class SnurhacScheme { kNone, kStatic, kDynamic, kBoth };

// "none", "sp", "dp", "sp-dp".
absl::StatusOr<SnurhacScheme> ParseSnurhacScheme(const std::string& text);
// "SnuRHAC", "SnuRHAC-SP", "SnuRHAC-DP", "SnuRHAC-SP-DP".
const char* SnurhacSchemeName(SnurhacScheme scheme);

struct ClusterCase {
  std::shared_ptr<const GridProgram> program;
  int devices = 1;
  SnurhacScheme scheme = SnurhacScheme::kNone;
  // The policy spec of dynamic prefetching's correlation half.
  std::string correlation = "snurhac-correlation";
  // Everything else: the device, network, capacity, checks.
  snurhac::ClusterConfig config;
};

struct ClusterCaseResult {
  ClusterCase request;
  snurhac::ClusterResult result;
};

// Makes the named grid program ("gemm" or "gemm:scale=0.1").
absl::StatusOr<std::shared_ptr<const GridProgram>> MakeGridProgram(const std::string& spec,
                                                                   const ComputeSpec& compute);

absl::StatusOr<ClusterCaseResult> RunClusterCase(const ClusterCase& request);

// Every case, `jobs` at a time on threads of their own (the runs share
// nothing but their programs, which they only read); results in request
// order and the same for any `jobs`. jobs <= 0: one per core.
std::vector<absl::StatusOr<ClusterCaseResult>> RunClusterCases(
    const std::vector<ClusterCase>& requests, int jobs);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_RUNNER_CLUSTER_STUDY_H_
