// The `mlp` workload: its kernel count, footprint, roofline times and
// parameters. Its stream's structure is checked with the other DNN
// generators' in dnn_workload_test.cc.
#include "workloads/dnn/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workload_events.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;

using ::umlab::testing::Drain;

std::unique_ptr<Workload> MakeMlp(const std::string& overrides = "",
                                  const ComputeSpec& spec = ComputeSpec{}) {
  return testing::MakeWorkload(overrides.empty() ? "mlp" : "mlp:" + overrides, spec);
}

// The structural checks mlp shares with the other generators live in
// dnn_workload_test.cc; these are mlp's own shape and numbers.

TEST(MlpWorkloadTest, EachIterationLaunchesEightKernelsPerLayerPlusOne) {
  for (const char* config : {"layers=1,hidden=512,batch=64,iterations=3,optimizer=sgd",
                             "layers=3,hidden=1000,batch=100,iterations=2,precision=fp16"}) {
    std::unique_ptr<Workload> workload = MakeMlp(config);
    ASSERT_NE(workload, nullptr);
    std::vector<int> per_iteration;
    for (const Event& e : Drain(*workload)) {
      if (e.kind == EventKind::kIterationBegin) per_iteration.push_back(0);
      if (e.kind == EventKind::kKernelBegin && !per_iteration.empty()) ++per_iteration.back();
    }
    const auto* mlp = dynamic_cast<const MlpWorkload*>(workload.get());
    ASSERT_NE(mlp, nullptr);
    ASSERT_EQ(per_iteration.size(), static_cast<size_t>(mlp->options().iterations)) << config;
    // 2 per layer forward, loss forward and backward, 4 per layer backward
    // but no input gradient for layer 0, one optimizer step per parameter.
    for (int kernels : per_iteration) EXPECT_EQ(kernels, 8 * mlp->options().layers + 1) << config;
  }
}

TEST(MlpWorkloadTest, DefaultFootprintIsAFewHundredMegabytes) {
  std::unique_ptr<Workload> workload = MakeMlp();
  ASSERT_NE(workload, nullptr);
  const auto* mlp = dynamic_cast<const MlpWorkload*>(workload.get());
  absl::StatusOr<MlpFootprint> footprint = mlp->Footprint();
  ASSERT_TRUE(footprint.ok()) << footprint.status();
  EXPECT_GE(footprint->peak_reserved_bytes, 300'000'000u);
  EXPECT_LE(footprint->peak_reserved_bytes, 700'000'000u);
  EXPECT_GE(footprint->peak_reserved_bytes, footprint->peak_allocated_bytes);
  EXPECT_GE(footprint->peak_allocated_bytes,
            footprint->parameter_bytes + footprint->optimizer_state_bytes +
                footprint->data_bytes);
  // Adam keeps two moments per parameter.
  EXPECT_EQ(footprint->optimizer_state_bytes, 2 * footprint->parameter_bytes);
  EXPECT_EQ(footprint->kernels_per_iteration, 65);

  const std::string description = workload->Describe();
  EXPECT_THAT(description, HasSubstr("peak reserved"));
  EXPECT_THAT(description, HasSubstr("65 per iteration"));
  std::printf("%s", description.c_str());
}

TEST(MlpWorkloadTest, IterationCountMatchesTheParameter) {
  std::unique_ptr<Workload> workload = MakeMlp("layers=2,hidden=128,batch=16,iterations=7");
  ASSERT_NE(workload, nullptr);
  int iterations = 0;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kIterationBegin) ++iterations;
  }
  EXPECT_EQ(iterations, 7);
}

TEST(MlpWorkloadTest, KernelTimesFollowTheRoofline) {
  ComputeSpec spec;
  spec.peak_flops_fp32 = 10e12;
  spec.peak_flops_tensor = 100e12;
  spec.memory_bytes_per_second = 1e12;
  for (const char* precision : {"fp32", "fp16"}) {
    std::unique_ptr<Workload> workload = MakeMlp(
        absl::StrCat("layers=1,hidden=4096,batch=4096,iterations=1,precision=", precision),
        spec);
    ASSERT_NE(workload, nullptr);
    const double element = absl::string_view(precision) == "fp32" ? 4 : 2;
    const double peak = element == 4 ? spec.peak_flops_fp32 : spec.peak_flops_tensor;
    const double flops = 2.0 * 4096 * 4096 * 4096;
    const double bytes = 3 * 4096.0 * 4096 * element;  // x, W, y
    const Nanos expected = static_cast<Nanos>(
        std::ceil(std::max(flops / peak, bytes / spec.memory_bytes_per_second) * 1e9));
    absl::flat_hash_map<uint32_t, std::string> names;
    bool found = false;
    for (const Event& e : Drain(*workload)) {
      if (e.kind == EventKind::kKernelDefine) names[e.exec_id] = e.name;
      if (e.kind == EventKind::kKernelBegin &&
          names[e.exec_id] == "gemm_fwd_l0_4096x4096x4096") {
        EXPECT_EQ(e.duration_ns, expected) << precision;
        found = true;
      }
    }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace umlab
