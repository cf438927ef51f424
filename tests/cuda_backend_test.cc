// The cuda backend on a real GPU. Skips, saying why, where the backend is
// not built or no GPU is visible (CI); runs on the device machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/runner/experiment.h"
#include "core/backend_registry.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Backends().Find("cuda") == nullptr) {
      GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
    }
    absl::StatusOr<std::unique_ptr<Backend>> probe =
        Backends().Create("cuda", *DevicePreset("h200"), 1);
    if (!probe.ok()) GTEST_SKIP() << "no usable GPU: " << probe.status().message();
    device_ = *DevicePreset("h200");
    absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload(
        "mlp", {"layers=2,hidden=1024,batch=512,iterations=3"}, device_.compute);
    ASSERT_TRUE(program.ok()) << program.status();
    program_.emplace(std::move(*program));
  }

  absl::StatusOr<RunResult> Run(const std::string& policy, const std::string& capacity) {
    RunRequest request;
    request.program = &*program_;
    request.device = device_;
    request.capacity = capacity;
    request.policy = policy;
    request.backend = "cuda";
    return ExecuteRun(request);
  }

  DeviceConfig device_;
  std::optional<ProgramInput> program_;
};

TEST_F(CudaBackendTest, RunsAndReportsRealFaultsAndTraffic) {
  absl::StatusOr<RunResult> result = Run("demand", "0.5");
  ASSERT_TRUE(result.ok()) << result.status();
  const RunStats& s = result->stats;
  EXPECT_EQ(result->backend, "cuda");
  EXPECT_GT(s.faults, 0u);
  EXPECT_GT(s.fault_records, 0u);
  EXPECT_GT(s.h2d_bytes, 0u);
  EXPECT_GT(s.time_ns, 0);
  EXPECT_GE(s.time_ns, s.ideal_time_ns / 2);  // the kernels really computed
  EXPECT_GT(s.evictions, 0u);                  // the budget was enforced
  ASSERT_EQ(s.per_iteration.size(), 3u);
}

TEST_F(CudaBackendTest, FullCapacityNeedsNoEvictions) {
  absl::StatusOr<RunResult> result = Run("demand", "1.0");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stats.evictions, 0u);
}

TEST_F(CudaBackendTest, RefusesMoreManagedMemoryThanTheGpuHas) {
  absl::StatusOr<ProgramInput> huge = ProgramInput::FromWorkload(
      "mlp", {"layers=64,hidden=32768,batch=8192,iterations=1"}, device_.compute);
  ASSERT_TRUE(huge.ok()) << huge.status();
  RunRequest request;
  request.program = &*huge;
  request.device = device_;
  request.backend = "cuda";
  absl::StatusOr<RunResult> result = ExecuteRun(request);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), ::testing::HasSubstr("free"));
}

}  // namespace
}  // namespace umlab::cli
