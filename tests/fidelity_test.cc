// Keeps the sim's predictions true to the GPU. The fixtures in
// tests/data/fidelity/ are programs recorded on an H200 by the cuda backend
// (`umlab record --backend=cuda --device=h200 --capacity=0.5`, real
// oversubscription under the driver, every transfer heard from the driver's
// own event queue), each with the JSON of that run and of two more runs of
// the same case (`umlab run`). Each
// case replays one on the sim as it predicts the cuda backend (the h200
// preset, `policy_from=user`: the policy acting from user space over a
// modelled driver) and fails when the prediction leaves the bound
// docs/fidelity.md states for it. A model change that moves a prediction out
// of its bound must come with a new measurement, not a wider bound.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "cli/runner/experiment.h"
#include "emu/device_presets.h"
#include "tests/sanitized_build.h"

namespace umlab::cli {
namespace {

// Bounds on |predicted - measured| / measured, from docs/fidelity.md.
constexpr double kDemandTime = 0.15;
constexpr double kDemandTraffic = 0.05;
// DeepUM's prefetches and pre-evictions are driver calls from user space;
// how they meet the driver's own faults and evictions is modelled, not
// replayed, so its time bound is wider (docs/fidelity.md, "Reading it").
// Its traffic bound is the 20% since the driver serves faults by
// itself in the sim (it was 40% before).
constexpr double kDeepumTime = 0.30;
constexpr double kDeepumTraffic = 0.20;

// Under the sanitizers only mlp: these cases check the model's numbers, and
// each larger replay takes minutes there (gpt2-small 301 s, resnet50 217 s
// in CI's sanitized build) for code mlp's replay already runs.
const char* const kAllWorkloads[] = {"mlp", "gpt2-small", "resnet50"};
const absl::Span<const char* const> kWorkloads =
    umlab::testing::kSanitized ? absl::MakeConstSpan(kAllWorkloads, 1)
                               : absl::MakeConstSpan(kAllWorkloads);

std::string Fixture(const std::string& workload, const std::string& policy,
                    const std::string& extension) {
  return absl::StrCat(UMLAB_SOURCE_DIR "/tests/data/fidelity/", workload, "_", policy, "_0.5.",
                      extension);
}

// The case as the GPU measured it: its figures averaged over the runs the
// fixture holds. One GPU run is not a stable referee: three runs of one
// case spread by up to 24% in time under demand and 61% in traffic under
// deepum (docs/fidelity.md, "Kept true in CI").
nlohmann::json Measured(const std::string& workload, const std::string& policy) {
  std::ifstream file(Fixture(workload, policy, "json"));
  EXPECT_TRUE(file.good()) << "cannot read " << Fixture(workload, policy, "json");
  const nlohmann::json report = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json runs = report.value("runs", nlohmann::json::array());
  EXPECT_GE(runs.size(), 3u);
  if (runs.empty()) return nlohmann::json::object();
  nlohmann::json mean = runs[0];
  for (const char* key : {"time_ns", "h2d_bytes", "d2h_bytes"}) {
    double sum = 0;
    for (const nlohmann::json& run : runs) {
      EXPECT_EQ(run["policy"], policy);
      EXPECT_EQ(run["capacity_bytes"], runs[0]["capacity_bytes"]);
      sum += run[key].get<double>();
    }
    mean[key] = sum / static_cast<double>(runs.size());
  }
  return mean;
}

// The run as the sim predicts it, from the same recorded program.
RunStats Predicted(const std::string& workload, const std::string& policy) {
  absl::StatusOr<ProgramInput> program = ProgramInput::FromTrace(Fixture(workload, policy, "umt"));
  EXPECT_TRUE(program.ok()) << program.status();
  absl::StatusOr<DeviceConfig> device = DevicePreset("h200");
  EXPECT_TRUE(device.ok()) << device.status();
  if (!program.ok() || !device.ok()) return RunStats{};
  RunRequest request;
  request.program = &*program;
  request.device = *device;
  request.capacity = "0.5";
  request.policy = policy;
  request.backend = "sim:policy_from=user";
  absl::StatusOr<RunResult> result = ExecuteRun(request);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return RunStats{};
  EXPECT_EQ(result->workload, workload);
  EXPECT_EQ(result->capacity_bytes, Measured(workload, policy)["capacity_bytes"].get<uint64_t>());
  return result->stats;
}

double Error(double predicted, const nlohmann::json& measured, const char* key) {
  const double value = measured[key].get<double>();
  return (predicted - value) / value;
}

// deepum's traffic for `key` is within kDeepumTraffic.
void ExpectDeepumTraffic(double predicted, const nlohmann::json& measured, const char* key) {
  EXPECT_NEAR(Error(predicted, measured, key), 0, kDeepumTraffic) << key;
}

class FidelityTest : public ::testing::TestWithParam<const char*> {};

// One case per workload: each prediction is a whole replay (a minute under
// the sanitizers), so the ranking check reuses the two it already has.
TEST_P(FidelityTest, DemandAndDeepumArePredictedAndRankTheSame) {
  const nlohmann::json demand = Measured(GetParam(), "demand");
  const RunStats demand_predicted = Predicted(GetParam(), "demand");
  EXPECT_NEAR(Error(demand_predicted.time_ns, demand, "time_ns"), 0, kDemandTime);
  EXPECT_NEAR(Error(demand_predicted.h2d_bytes, demand, "h2d_bytes"), 0, kDemandTraffic);
  EXPECT_NEAR(Error(demand_predicted.d2h_bytes, demand, "d2h_bytes"), 0, kDemandTraffic);

  const nlohmann::json deepum = Measured(GetParam(), "deepum");
  const RunStats deepum_predicted = Predicted(GetParam(), "deepum");
  EXPECT_NEAR(Error(deepum_predicted.time_ns, deepum, "time_ns"), 0, kDeepumTime);
  ExpectDeepumTraffic(deepum_predicted.h2d_bytes, deepum, "h2d_bytes");
  ExpectDeepumTraffic(deepum_predicted.d2h_bytes, deepum, "d2h_bytes");

  // deepum is faster than demand on both sides.
  EXPECT_LT(deepum["time_ns"].get<double>(), demand["time_ns"].get<double>());
  EXPECT_LT(deepum_predicted.time_ns, demand_predicted.time_ns);
}

INSTANTIATE_TEST_SUITE_P(H200, FidelityTest, ::testing::ValuesIn(kWorkloads),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace umlab::cli
