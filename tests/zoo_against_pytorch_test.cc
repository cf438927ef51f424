// The zoo's generators against PyTorch 2.11 on a GPU: the figures
// bench/torch_zoo_probe.py measured (bench/results/torch-zoo-h200/,
// docs/workloads.md "The zoo against PyTorch"), and the launch rule of
// PyTorch's foreach kernels that the optimizer step follows.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/workload_events.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/multi_tensor_apply.h"

namespace umlab {
namespace {

using ::umlab::testing::Drain;

TEST(MultiTensorApplyTest, LaunchesWhenTheChunksAreFull) {
  // 640 chunks of one tensor: two launches of 320, the tensor cut between them.
  const std::vector<ForeachLaunch> launches =
      MultiTensorLaunches({640 * kForeachChunkElements}, 1, false);
  ASSERT_EQ(launches.size(), 2u);
  ASSERT_EQ(launches[0].size(), 1u);
  EXPECT_EQ(launches[0][0].first_chunk, 0u);
  EXPECT_EQ(launches[0][0].end_chunk, 320u);
  EXPECT_EQ(launches[1][0].first_chunk, 320u);
  EXPECT_EQ(launches[1][0].end_chunk, 640u);
}

TEST(MultiTensorApplyTest, LaunchesWhenTheDepthsTensorsAreFull) {
  const std::vector<uint64_t> small(111, 1000);
  EXPECT_EQ(MultiTensorLaunches(small, 1, false).size(), 2u);  // 110 + 1
  EXPECT_EQ(MultiTensorLaunches(small, 1, true).size(), 2u);   // 96 + 15
  EXPECT_EQ(MultiTensorLaunches(small, 1, true)[0].size(), 96u);
  EXPECT_EQ(MultiTensorLaunches(small, 3, false).size(), 3u);  // 48 + 48 + 15
  EXPECT_EQ(MultiTensorLaunches(std::vector<uint64_t>(110, 1000), 1, false).size(), 1u);
}

TEST(MultiTensorApplyTest, ACutTensorOpensTheNextLaunch) {
  // 63 one-chunk tensors, then one of 300 chunks: the chunk limit cuts the
  // last one, and its rest goes on in a launch of its own.
  std::vector<uint64_t> elements(63, 10);
  elements.push_back(300 * kForeachChunkElements);
  const std::vector<ForeachLaunch> launches = MultiTensorLaunches(elements, 2, false);
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].back().index, 63);
  EXPECT_EQ(launches[0].back().end_chunk, 257u);
  EXPECT_EQ(launches[1].front().first_chunk, 257u);
}

TEST(MultiTensorApplyTest, SkipsEmptyTensors) {
  const std::vector<ForeachLaunch> launches = MultiTensorLaunches({0, 5, 0}, 1, false);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].size(), 1u);
  EXPECT_EQ(launches[0][0].index, 1);
}

// What the profiler counted on PyTorch 2.11 (H100, one steady iteration,
// Adam, fp32, bench/results/torch-zoo-h200/zoo_probe*.jsonl).
struct Measured {
  const char* spec;
  int kernels;            // every kernel of the iteration
  int foreach_kernels;    // multi_tensor_apply_kernel launches
  int kernels_without_foreach;  // with foreach=False (0: not measured)
  uint64_t peak_reserved_bytes;  // torch.cuda.max_memory_reserved()
};

const Measured kMeasured[] = {
    {"gpt2-small:batch=1", 818, 49, 1805, 3506438144},
    {"bert-base:batch=8", 745, 42, 0, 5637144576},
    {"resnet50:batch=32,optimizer=adam", 739, 23, 1843, 3709861888},
    {"vit-b:batch=16", 759, 35, 0, 3441426432},
    {"mobilenet:batch=64,optimizer=adam", 483, 20, 0, 5794430976},
};

struct IterationKernels {
  int all = 0;
  int foreach = 0;
};

// The kernels of the second iteration (the first steady one).
IterationKernels CountKernels(const std::string& spec) {
  std::unique_ptr<Workload> workload = testing::MakeWorkload(spec + ",iterations=2");
  IterationKernels counts;
  if (workload == nullptr) return counts;
  absl::flat_hash_map<uint32_t, std::string> names;
  int iteration = -1;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kIterationBegin) iteration = static_cast<int>(e.iteration);
    if (e.kind == EventKind::kKernelDefine) names[e.exec_id] = e.name;
    if (e.kind == EventKind::kKernelBegin && iteration == 1) {
      ++counts.all;
      if (absl::StartsWith(names[e.exec_id], "foreach_")) ++counts.foreach;
    }
  }
  return counts;
}

class ZooAgainstPytorchTest : public ::testing::TestWithParam<Measured> {};

// The optimizer step is exact: foreach launches and the 7-kernel loop.
TEST_P(ZooAgainstPytorchTest, OptimizerKernelsAreExact) {
  const Measured& m = GetParam();
  const IterationKernels foreach = CountKernels(m.spec);
  EXPECT_EQ(foreach.foreach, m.foreach_kernels);
  if (m.kernels_without_foreach > 0) {
    const IterationKernels loop = CountKernels(std::string(m.spec) + ",foreach=false");
    EXPECT_EQ(loop.foreach, 0);
    EXPECT_EQ(loop.all - foreach.all, m.kernels_without_foreach - m.kernels);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooAgainstPytorchTest, ::testing::ValuesIn(kMeasured));

// Footprint (peak reserved) and kernels per iteration within 10% of
// PyTorch's, the target of docs/workloads.md "The zoo against PyTorch 2.11".
TEST(ZooAgainstPytorchTest, FootprintAndKernelCountsAreWithinTenPercent) {
  for (size_t i = 0; i < std::size(kMeasured); ++i) {
    const Measured& m = kMeasured[i];
    std::unique_ptr<Workload> workload = testing::MakeWorkload(m.spec);
    ASSERT_NE(workload, nullptr);
    auto* dnn = dynamic_cast<DnnWorkload*>(workload.get());
    ASSERT_NE(dnn, nullptr);
    absl::StatusOr<ProgramFootprint> footprint = dnn->Footprint();
    ASSERT_TRUE(footprint.ok()) << footprint.status();
    const double kernels = static_cast<double>(footprint->kernels_per_iteration) / m.kernels;
    const double reserved =
        static_cast<double>(footprint->peak_reserved_bytes) / static_cast<double>(m.peak_reserved_bytes);
    EXPECT_NEAR(kernels, 1.0, 0.10) << m.spec;
    EXPECT_NEAR(reserved, 1.0, 0.10) << m.spec;
  }
}

}  // namespace
}  // namespace umlab
