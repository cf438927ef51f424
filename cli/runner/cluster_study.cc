#include "cli/runner/cluster_study.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/policy.h"
#include "workloads/grid_workload.h"

namespace umlab::cli {

absl::StatusOr<SnurhacScheme> ParseSnurhacScheme(const std::string& text) {
  if (text == "none") return SnurhacScheme::kNone;
  if (text == "sp") return SnurhacScheme::kStatic;
  if (text == "dp") return SnurhacScheme::kDynamic;
  if (text == "sp-dp") return SnurhacScheme::kBoth;
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown SnuRHAC scheme '%s'; known: none, sp, dp, sp-dp", text));
}

const char* SnurhacSchemeName(SnurhacScheme scheme) {
  switch (scheme) {
    case SnurhacScheme::kNone:
      return "SnuRHAC";
    case SnurhacScheme::kStatic:
      return "SnuRHAC-SP";
    case SnurhacScheme::kDynamic:
      return "SnuRHAC-DP";
    case SnurhacScheme::kBoth:
      return "SnuRHAC-SP-DP";
  }
  return "?";
}

absl::StatusOr<std::shared_ptr<const GridProgram>> MakeGridProgram(const std::string& spec,
                                                                   const ComputeSpec& compute) {
  absl::StatusOr<std::unique_ptr<GridProgram>> program = GridWorkloads().Create(spec, compute);
  if (!program.ok()) return program.status();
  if (absl::Status status = (*program)->Validate(); !status.ok()) return status;
  return std::shared_ptr<const GridProgram>(*std::move(program));
}

absl::StatusOr<ClusterCaseResult> RunClusterCase(const ClusterCase& request) {
  snurhac::ClusterConfig config = request.config;
  config.devices = request.devices;
  const bool dynamic =
      request.scheme == SnurhacScheme::kDynamic || request.scheme == SnurhacScheme::kBoth;
  config.static_prefetch =
      request.scheme == SnurhacScheme::kStatic || request.scheme == SnurhacScheme::kBoth;
  config.adjacent_prefetch = dynamic;
  // Without dynamic prefetching the driver fetches exactly the faulted
  // pages and evicts the least recently migrated block: `demand`.
  const std::string policy = dynamic ? request.correlation : "demand";
  absl::StatusOr<snurhac::ClusterResult> result = snurhac::RunCluster(
      *request.program, config, [&policy](int) { return Policies().Create(policy); });
  if (!result.ok()) return result.status();
  return ClusterCaseResult{request, *std::move(result)};
}

std::vector<absl::StatusOr<ClusterCaseResult>> RunClusterCases(
    const std::vector<ClusterCase>& requests, int jobs) {
  std::vector<absl::StatusOr<ClusterCaseResult>> results(requests.size(),
                                                         absl::UnknownError("not run"));
  const int threads = std::max(
      1, std::min<int>(jobs > 0 ? jobs : static_cast<int>(std::thread::hardware_concurrency()),
                       static_cast<int>(requests.size())));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < requests.size(); i = next++)
      results[i] = RunClusterCase(requests[i]);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  return results;
}

}  // namespace umlab::cli
