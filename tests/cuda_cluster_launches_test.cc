// The host side of SnuRHAC's run on real GPUs (backends/cuda/cluster_launches.h):
// a share's pages as the replay kernel's ranges, the same shares, pages and
// compute as the cluster sim's launch plan, static prefetching's ranges, and
// the read-mostly advice that stands for the read-only flag. Host code only,
// so it runs wherever the cuda backend is built, GPU or not.
#include <gtest/gtest.h>

#if __has_include("backends/cuda/cluster_launches.h")
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cluster_launches.h"
#include "core/compute_spec.h"
#include "emu/snurhac/launch_plan.h"
#include "workloads/grid_workload.h"

namespace umlab::cuda {
namespace {

constexpr uint64_t kBase = uint64_t{7} << 40;  // a 2 MB-aligned managed address

std::unique_ptr<GridProgram> Make(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<GridProgram>> program =
      GridWorkloads().Create(spec, ComputeSpec{});
  EXPECT_TRUE(program.ok()) << program.status();
  return *std::move(program);
}

std::vector<ClusterLaunch> Plan(const GridProgram& program, int devices, ClusterScheme scheme,
                                bool read_mostly = true) {
  ClusterLaunchOptions options;
  options.devices = devices;
  options.scheme = scheme;
  options.read_mostly = read_mostly;
  options.streams = 132 * 8;
  options.base = kBase;
  absl::StatusOr<std::vector<ClusterLaunch>> launches = PlanClusterLaunches(program, options);
  EXPECT_TRUE(launches.ok()) << launches.status();
  return *std::move(launches);
}

TEST(ClusterLaunchesTest, PageRunsBecomeReplayRangesWithTheWriteBit) {
  const std::vector<snurhac::PageRun> runs = {
      {0, 3, false},   // pages 0-2, read
      {3, 2, false},   // continues them: one range
      {10, 1, true},   // a write elsewhere
      {11, 4, false},  // follows it, but reads: a range of its own
      {0, 3, false},   // the first pages again, later in the kernel
      {7, 0, true},    // nothing
  };
  const std::vector<DeviceRange> ranges = ToDeviceRanges(runs, kBase);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].address_and_write, kBase);
  EXPECT_EQ(ranges[0].first_access, 0u);
  EXPECT_EQ(ranges[1].address_and_write, (kBase + 10 * kPageSize) | 1);
  EXPECT_EQ(ranges[1].first_access, 5u);
  EXPECT_EQ(ranges[2].address_and_write, kBase + 11 * kPageSize);
  EXPECT_EQ(ranges[2].first_access, 6u);
  EXPECT_EQ(ranges[3].address_and_write, kBase);
  EXPECT_EQ(ranges[3].first_access, 10u);
}

// Every device runs what the sim's device runs: the same share's pages, in
// the same order, and its fraction of the compute.
TEST(ClusterLaunchesTest, SharesAreTheSimsPagesAndCompute) {
  const std::unique_ptr<GridProgram> program = Make("gemm:scale=0.05");
  for (int devices : {1, 2, 3}) {
    const std::vector<ClusterLaunch> launches = Plan(*program, devices, ClusterScheme::kNone);
    ASSERT_EQ(launches.size(), program->launches.size());
    for (size_t k = 0; k < launches.size(); ++k) {
      const GridKernel& kernel = program->launches[k];
      absl::StatusOr<snurhac::LaunchPlan> plan = snurhac::PlanLaunch(*program, kernel, devices);
      ASSERT_TRUE(plan.ok());
      ASSERT_EQ(launches[k].devices.size(), static_cast<size_t>(devices));
      Nanos compute = 0;
      for (int d = 0; d < devices; ++d) {
        const DeviceLaunch& share = launches[k].devices[d];
        const std::vector<snurhac::PageRun> runs =
            snurhac::SharePageRuns(*program, kernel, plan->shares[d]);
        uint64_t pages = 0;
        for (const snurhac::PageRun& run : runs) pages += run.count;
        EXPECT_EQ(share.accesses, pages);
        EXPECT_EQ(share.ranges.size(), ToDeviceRanges(runs, kBase).size());
        EXPECT_EQ(share.compute_ns, snurhac::ShareComputeNs(kernel, plan->shares[d]));
        EXPECT_EQ(share.pace.issuers, std::min<uint64_t>(132 * 8, pages));
        compute += share.compute_ns;
        // Every range lies in the managed range.
        for (const DeviceRange& range : share.ranges) {
          EXPECT_GE(range.address_and_write & ~uint64_t{1}, kBase);
          EXPECT_LT(range.address_and_write & ~uint64_t{1}, kBase + program->footprint_bytes());
        }
      }
      EXPECT_NEAR(static_cast<double>(compute), static_cast<double>(kernel.compute_ns),
                  devices);
    }
  }
  // gemm's every share reads all of B (the thesis's reason it scales
  // poorly): with two devices, each touches more than half the footprint's
  // pages of A, B and C together would give it.
  const std::vector<ClusterLaunch> two = Plan(*program, 2, ClusterScheme::kNone);
  const GridArray& b = program->arrays[1];
  for (const DeviceLaunch& share : two[0].devices) {
    EXPECT_GE(share.touched_bytes(), b.bytes);
  }
}

TEST(ClusterLaunchesTest, StaticPrefetchingFetchesMapasRangesOnlyUnderSp) {
  const std::unique_ptr<GridProgram> gemm = Make("gemm:scale=0.05");
  // Held: a range-for over a member of a returned temporary would outlive it.
  const std::vector<ClusterLaunch> none = Plan(*gemm, 2, ClusterScheme::kNone);
  for (const DeviceLaunch& share : none[0].devices) EXPECT_TRUE(share.prefetch.empty());
  const std::vector<ClusterLaunch> sp = Plan(*gemm, 2, ClusterScheme::kStatic);
  absl::StatusOr<snurhac::LaunchPlan> plan = snurhac::PlanLaunch(*gemm, gemm->launches[0], 2);
  ASSERT_TRUE(plan.ok());
  for (int d = 0; d < 2; ++d) {
    const std::vector<ByteRange>& prefetch = sp[0].devices[d].prefetch;
    ASSERT_FALSE(prefetch.empty());
    for (size_t i = 0; i < prefetch.size(); ++i) {
      EXPECT_EQ(prefetch[i].begin % kPageSize, 0u);
      EXPECT_EQ(prefetch[i].end % kPageSize, 0u);
      EXPECT_GE(prefetch[i].begin, kBase);
      if (i > 0) {
        EXPECT_GT(prefetch[i].begin, prefetch[i - 1].end);  // sorted, merged
      }
    }
    // gemm is all affine: MAPA's hulls cover every page the share touches.
    for (const snurhac::PageRun& run :
         snurhac::SharePageRuns(*gemm, gemm->launches[0], plan->shares[d])) {
      const uint64_t begin = kBase + run.first * kPageSize;
      const uint64_t end = begin + run.count * kPageSize;
      EXPECT_TRUE(std::any_of(prefetch.begin(), prefetch.end(), [&](const ByteRange& range) {
        return range.begin <= begin && end <= range.end;
      })) << "device " << d << " page " << run.first;
    }
  }
  // tpacf's point reads are opaque to MAPA: only the histogram is fetched.
  const std::unique_ptr<GridProgram> tpacf = Make("tpacf:scale=0.05");
  const std::vector<ClusterLaunch> tpacf_sp = Plan(*tpacf, 2, ClusterScheme::kStatic);
  const DeviceLaunch& share = tpacf_sp[0].devices[0];
  uint64_t bytes = 0;
  for (const ByteRange& range : share.prefetch) bytes += range.size();
  EXPECT_GT(bytes, 0u);
  EXPECT_LT(bytes, share.touched_bytes() / 4);
}

// The read-only flag maps to cudaMemAdviseSetReadMostly: set on the arrays a
// kernel only reads, unset on those it writes, and only where it changes.
TEST(ClusterLaunchesTest, ReadMostlyFollowsWhatEachKernelOnlyReads) {
  const std::unique_ptr<GridProgram> program = Make("correlation:scale=0.1");
  auto index = [&](const std::string& name) {
    for (size_t i = 0; i < program->arrays.size(); ++i) {
      if (program->arrays[i].name == name) return static_cast<int>(i);
    }
    ADD_FAILURE() << name;
    return -1;
  };
  const int data = index("data"), mean = index("mean"), stddev = index("stddev");
  const std::vector<ClusterLaunch> launches = Plan(*program, 2, ClusterScheme::kNone);
  ASSERT_EQ(launches.size(), 4u);
  auto advice = [&](size_t k) {
    std::vector<std::pair<int, bool>> out;
    for (const ReadMostlyAdvice& a : launches[k].advice) out.emplace_back(a.array, a.set);
    return out;
  };
  using Pairs = std::vector<std::pair<int, bool>>;
  EXPECT_EQ(advice(0), (Pairs{{data, true}}));                      // mean_kernel
  EXPECT_EQ(advice(1), (Pairs{{mean, true}}));                      // std_kernel
  EXPECT_EQ(advice(2), (Pairs{{data, false}, {stddev, true}}));     // reduce writes data
  EXPECT_EQ(advice(3), (Pairs{{data, true}}));                      // corr reads it again
  const std::vector<ClusterLaunch> unadvised = Plan(*program, 2, ClusterScheme::kNone, false);
  for (const ClusterLaunch& launch : unadvised) {
    EXPECT_TRUE(launch.advice.empty());
  }
}

// §6.4: corr_kernel's devices would write the same rows; it runs on device 0.
TEST(ClusterLaunchesTest, TheSingleDeviceRuleLeavesTheOtherDevicesIdle) {
  const std::unique_ptr<GridProgram> program = Make("correlation:scale=0.1");
  const std::vector<ClusterLaunch> launches = Plan(*program, 2, ClusterScheme::kStatic);
  const ClusterLaunch& corr = launches[3];
  EXPECT_TRUE(corr.single_device);
  EXPECT_GT(corr.devices[0].accesses, 0u);
  EXPECT_EQ(corr.devices[1].accesses, 0u);
  EXPECT_EQ(corr.devices[1].compute_ns, 0);
  EXPECT_TRUE(corr.devices[1].prefetch.empty());
  EXPECT_EQ(corr.devices[0].compute_ns, program->launches[3].compute_ns);
  EXPECT_FALSE(launches[0].single_device);
}

TEST(ClusterLaunchesTest, BadSchemesAndBasesAreRefused) {
  EXPECT_EQ(*ParseClusterScheme("none"), ClusterScheme::kNone);
  EXPECT_EQ(*ParseClusterScheme("sp"), ClusterScheme::kStatic);
  for (const char* text : {"dp", "sp-dp", "fast"}) {
    const absl::StatusOr<ClusterScheme> scheme = ParseClusterScheme(text);
    ASSERT_FALSE(scheme.ok());
    EXPECT_EQ(std::string(scheme.status().message()).find('\n'), std::string::npos);
  }
  const std::unique_ptr<GridProgram> program = Make("gemm:scale=0.05");
  ClusterLaunchOptions options;
  options.base = kBase + 4096;
  EXPECT_FALSE(PlanClusterLaunches(*program, options).ok());
  options.base = kBase;
  options.devices = 0;
  EXPECT_FALSE(PlanClusterLaunches(*program, options).ok());
}

}  // namespace
}  // namespace umlab::cuda

#else
TEST(ClusterLaunches, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
}
#endif
