// HUM's programs (workloads/hum, small sizes) on the uffd backend under the
// three ways of copying: memcpy's DMA, unified memory's host access, and
// hum's hidden copies with real staging threads, real landings and the
// sources write-protected. Every word a kernel or host code reads is
// checked against the content the program's copies carried.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/policy.h"
#include "emu/device_presets.h"
#include "tests/sanitized_build.h"
#include "tests/uffd_harness.h"
#include "tests/workload_events.h"

namespace umlab::testing {
namespace {

const std::vector<std::string>& Programs() {
  static const auto* programs = new std::vector<std::string>{
      "parboil-spmv:rows=20000,nonzeros=200000,launches=3",
      "rodinia-cfd:elements=20000,iterations=2",  // deletes its sources right after the copies
      "rodinia-srad:rows=512,cols=512",  // copies its image back into its source
      "cuda-vectoradd:elements=1048576",
      "cuda-matrixmul:launches=5",
  };
  return *programs;
}

UffdRun RunProgram(const std::string& spec, const std::string& policy_spec) {
  const DeviceConfig device = *DevicePreset("v100-pcie3");
  std::unique_ptr<Workload> workload = MakeWorkload(spec, device.compute);
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(policy_spec);
  UffdRun run;
  if (workload == nullptr || !policy.ok()) {
    run.status = absl::InvalidArgumentError(spec + " or " + policy_spec);
    return run;
  }
  std::unique_ptr<EventSource> source = workload->Open();
  // Room for every buffer, as the thesis's datasets fit in device memory.
  return RunOnUffd(*source, 64, **policy, device, VerifiedUffdOptions());
}

class UffdHumTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UffdHumTest, RunsCleanUnderEveryWayOfCopying) {
  const std::vector<std::string> policies =
      kSanitized ? std::vector<std::string>{"hum"}
                 : std::vector<std::string>{"memcpy", "uvm-default", "hum", "hum:sched=false"};
  for (const std::string& policy : policies) {
    const UffdRun run = RunProgram(GetParam(), policy);
    ASSERT_TRUE(run.status.ok()) << policy << ": " << run.status;
    EXPECT_EQ(run.counters.corrupted_words, 0u) << policy;
    EXPECT_GT(run.counters.pages_checked, 0u) << policy;
    EXPECT_GT(run.stats.copies, 0u) << policy;
    if (policy == "memcpy") {
      EXPECT_GT(run.stats.dma_h2d_bytes, 0u);
      EXPECT_EQ(run.stats.faults, 0u);  // device memory
    } else if (policy == "uvm-default") {
      EXPECT_EQ(run.stats.dma_h2d_bytes + run.stats.dma_d2h_bytes, 0u);
    } else {
      EXPECT_GT(run.stats.hidden_copy_bytes, 0u) << policy;
      EXPECT_EQ(run.stats.dma_h2d_bytes, 0u) << policy;
      EXPECT_GT(run.stats.dma_d2h_bytes, 0u) << policy;
    }
  }
}

// "rodinia-cfd:elements=20000" -> "rodinia_cfd".
std::string ProgramName(const ::testing::TestParamInfo<std::string>& program) {
  std::string name = program.param.substr(0, program.param.find(':'));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Programs, UffdHumTest, ::testing::ValuesIn(Programs()), ProgramName);

}  // namespace
}  // namespace umlab::testing
