#include "backends/cuda/cluster_launches.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"

namespace umlab::cuda {
namespace {

// Whole pages, sorted and merged: a prefetch call per run, never two for
// one page.
std::vector<ByteRange> WholePagesMerged(const std::vector<snurhac::PrefetchRange>& ranges,
                                        uint64_t base) {
  std::vector<ByteRange> pages;
  for (const snurhac::PrefetchRange& range : ranges) {
    if (range.bytes.size() == 0) continue;
    pages.push_back({base + range.bytes.begin / kPageSize * kPageSize,
                     base + (range.bytes.end + kPageSize - 1) / kPageSize * kPageSize});
  }
  std::sort(pages.begin(), pages.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange& range : pages) {
    if (!merged.empty() && range.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, range.end);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

}  // namespace

absl::StatusOr<ClusterScheme> ParseClusterScheme(const std::string& text) {
  if (text == "none") return ClusterScheme::kNone;
  if (text == "sp") return ClusterScheme::kStatic;
  if (text == "dp" || text == "sp-dp") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "scheme '%s' has no counterpart on a real GPU (the driver's own prefetcher always runs "
        "and SnuRHAC's correlation prefetching is not the driver's); use none or sp, and "
        "'umlab snurhac' for dp",
        text));
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown scheme '%s'; the GPU run knows none and sp", text));
}

const char* ClusterSchemeName(ClusterScheme scheme) {
  return scheme == ClusterScheme::kStatic ? "sp" : "none";
}

std::vector<DeviceRange> ToDeviceRanges(const std::vector<snurhac::PageRun>& runs,
                                        uint64_t base) {
  std::vector<DeviceRange> ranges;
  uint64_t accesses = 0;
  PageNumber next_page = 0;  // the page after the last range's
  bool last_write = false;
  for (const snurhac::PageRun& run : runs) {
    if (run.count == 0) continue;
    // The replay kernel walks a range page by page from its first, so a run
    // that continues the previous one's pages with the same kind extends it.
    const bool extends = !ranges.empty() && last_write == run.write && next_page == run.first;
    if (!extends) {
      ranges.push_back(DeviceRange{(base + run.first * kPageSize) | (run.write ? 1u : 0u),
                                   accesses});
    }
    accesses += run.count;
    next_page = run.first + run.count;
    last_write = run.write;
  }
  return ranges;
}

absl::StatusOr<std::vector<ClusterLaunch>> PlanClusterLaunches(
    const GridProgram& program, const ClusterLaunchOptions& options) {
  if (options.devices < 1) {
    return absl::InvalidArgumentError("the GPU run needs at least one device");
  }
  if (options.base % kBlockSize != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("managed base %#x is not 2 MB aligned", options.base));
  }
  if (absl::Status status = program.Validate(); !status.ok()) return status;
  std::vector<ClusterLaunch> launches;
  std::map<int, bool> advised;  // array -> read-mostly now
  for (const GridKernel& kernel : program.launches) {
    absl::StatusOr<snurhac::LaunchPlan> plan =
        snurhac::PlanLaunch(program, kernel, options.devices);
    if (!plan.ok()) return plan.status();
    ClusterLaunch launch;
    launch.kernel = kernel.name;
    launch.single_device = plan->single_device;
    if (options.read_mostly) {
      for (const auto& [array, only_read] : plan->only_read) {
        auto [it, inserted] = advised.try_emplace(array, false);
        // Managed memory starts without the advice: unsetting it there
        // would be a call that changes nothing.
        if (it->second == only_read) continue;
        it->second = only_read;
        launch.advice.push_back(ReadMostlyAdvice{array, only_read});
      }
    }
    for (const GridShare& share : plan->shares) {
      DeviceLaunch device;
      const std::vector<snurhac::PageRun> runs = snurhac::SharePageRuns(program, kernel, share);
      device.ranges = ToDeviceRanges(runs, options.base);
      for (const snurhac::PageRun& run : runs) device.accesses += run.count;
      device.compute_ns = snurhac::ShareComputeNs(kernel, share);
      device.pace = PaceOf(device.compute_ns, device.accesses, options.streams);
      // As in the sim, a share that touches nothing queues no prefetches.
      if (options.scheme == ClusterScheme::kStatic && device.accesses > 0) {
        device.prefetch =
            WholePagesMerged(snurhac::StaticPrefetchRanges(program, kernel, share), options.base);
      }
      launch.devices.push_back(std::move(device));
    }
    launches.push_back(std::move(launch));
  }
  return launches;
}

}  // namespace umlab::cuda
