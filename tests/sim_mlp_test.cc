// The done-when checks of the core on the mlp workload: oversubscription
// costs time, full capacity faults only on first touch, runs repeat exactly,
// and every invariant holds after every engine step for every policy.
#include <gtest/gtest.h>

#include "cli/runner/experiment.h"
#include "core/policy.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

class SimMlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = *DevicePreset("v100-pcie3");
    // Smaller than the default so the suite stays quick, still many blocks.
    absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload(
        "mlp", {"layers=4,hidden=1024,batch=512,iterations=4"}, device_.compute);
    ASSERT_TRUE(program.ok()) << program.status();
    program_.emplace(std::move(*program));
  }

  absl::StatusOr<RunResult> TryRun(const std::string& policy, const std::string& capacity,
                                   bool check) {
    RunRequest request;
    request.program = &*program_;
    request.device = device_;
    request.capacity = capacity;
    request.policy = policy;
    request.check_invariants = check;
    return ExecuteRun(request);
  }

  RunResult Run(const std::string& policy, const std::string& capacity, bool check = false) {
    absl::StatusOr<RunResult> result = TryRun(policy, capacity, check);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : RunResult{};
  }

  DeviceConfig device_;
  std::optional<ProgramInput> program_;
};

TEST_F(SimMlpTest, HalfCapacityEvictsAndCostsTime) {
  const RunResult demand = Run("demand", "0.5");
  EXPECT_GT(demand.stats.evictions, 0u);
  EXPECT_GT(demand.stats.evicted_bytes, 0u);
  EXPECT_GT(demand.stats.time_ns, demand.stats.ideal_time_ns);
  EXPECT_LE(demand.stats.peak_used_frames * kBlockSize, demand.capacity_bytes);
  ASSERT_EQ(demand.stats.per_iteration.size(), 4u);
  for (const IterationStats& it : demand.stats.per_iteration) EXPECT_GT(it.faults, 0u);
}

TEST_F(SimMlpTest, FullCapacityFaultsOnlyInTheFirstIteration) {
  const RunResult demand = Run("demand", "1.0");
  EXPECT_EQ(demand.stats.evictions, 0u);
  ASSERT_EQ(demand.stats.per_iteration.size(), 4u);
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(demand.stats.per_iteration[i].faults, 0u) << "iteration " << i;
    EXPECT_EQ(demand.stats.per_iteration[i].h2d_bytes, 0u);
  }
}

TEST_F(SimMlpTest, IdealIsTheFastest) {
  const RunResult ideal = Run("ideal", "0.5");
  const RunResult demand = Run("demand", "0.5");
  EXPECT_LT(ideal.stats.time_ns, demand.stats.time_ns);
  EXPECT_EQ(ideal.stats.evictions, 0u);
}

TEST_F(SimMlpTest, RepeatedRunsAreIdentical) {
  const RunResult a = Run("demand", "0.5");
  const RunResult b = Run("demand", "0.5");
  EXPECT_EQ(a.stats.time_ns, b.stats.time_ns);
  EXPECT_EQ(a.stats.faults, b.stats.faults);
  EXPECT_EQ(a.stats.h2d_bytes, b.stats.h2d_bytes);
  EXPECT_EQ(a.stats.d2h_bytes, b.stats.d2h_bytes);
  EXPECT_EQ(a.stats.stall_ns, b.stats.stall_ns);
}

// Capacity, byte conservation and page-state invariants after every engine
// step, and the device's page table agreeing with the engine at the end,
// for every registered policy at several capacities. A policy may refuse a
// capacity it cannot train at (flashneuron keeps every weight on the
// device), in one line, before it runs; at the full footprint every one
// runs.
TEST_F(SimMlpTest, InvariantsHoldForEveryPolicy) {
  for (const PolicyRegistry::Entry* entry : Policies().Entries()) {
    for (const char* capacity : {"0.3", "0.5", "1.0"}) {
      SCOPED_TRACE(entry->name + " at " + capacity);
      absl::StatusOr<RunResult> result = TryRun(entry->name, capacity, /*check=*/true);
      if (!result.ok() && result.status().code() == absl::StatusCode::kFailedPrecondition &&
          std::string(capacity) != "1.0") {
        EXPECT_EQ(result.status().message().find('\n'), std::string::npos);
        continue;
      }
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->stats.h2d_bytes,
                result->stats.fault_migrated_bytes + result->stats.prefetch_bytes);
      EXPECT_GT(result->stats.page_accesses, 0u);
    }
  }
}

}  // namespace
}  // namespace umlab::cli
