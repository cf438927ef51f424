// The `mlp` workload: a deterministic, well-formed program whose accesses
// stay inside live allocations.
#include "workloads/dnn/mlp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Workload> MakeMlp(const std::string& overrides = "",
                                  const ComputeSpec& spec = ComputeSpec{}) {
  absl::StatusOr<std::unique_ptr<Workload>> workload =
      Workloads().Create(overrides.empty() ? "mlp" : "mlp:" + overrides, spec);
  EXPECT_TRUE(workload.ok()) << workload.status();
  return workload.ok() ? std::move(*workload) : nullptr;
}

std::vector<Event> Drain(const Workload& workload) {
  std::unique_ptr<EventSource> source = workload.Open();
  std::vector<Event> events;
  Event event;
  while (source->Next(event)) events.push_back(event);
  EXPECT_TRUE(source->status().ok()) << source->status();
  return events;
}

// Configurations the structural checks run on: the defaults and variants
// that change sizes, pools and the optimizer's shape.
const char* const kConfigurations[] = {
    "",
    "layers=1,hidden=512,batch=64,iterations=3,optimizer=sgd",
    "layers=3,hidden=1000,batch=100,iterations=2,precision=fp16",
    "layers=2,hidden=64,batch=8,iterations=2,precision=bf16,optimizer=sgd",
};

class MlpStructureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MlpStructureTest, StreamsAreIdentical) {
  std::unique_ptr<Workload> workload = MakeMlp(GetParam());
  ASSERT_NE(workload, nullptr);
  const std::vector<Event> first = Drain(*workload);
  const std::vector<Event> second = Drain(*workload);
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second);
}

TEST_P(MlpStructureTest, AccessesTouchOnlyActiveRanges) {
  std::unique_ptr<Workload> workload = MakeMlp(GetParam());
  ASSERT_NE(workload, nullptr);
  std::map<uint64_t, uint64_t> segments;  // start -> end
  std::map<uint64_t, uint64_t> active;    // start -> end
  // The range [address, address + size) lies inside one entry of `ranges`.
  auto inside = [](const std::map<uint64_t, uint64_t>& ranges, uint64_t address,
                   uint64_t size) {
    auto it = ranges.upper_bound(address);
    if (it == ranges.begin()) return false;
    --it;
    return address >= it->first && address + size <= it->second;
  };
  bool in_kernel = false;
  int accesses = 0;
  for (const Event& e : Drain(*workload)) {
    switch (e.kind) {
      case EventKind::kAlloc:
        ASSERT_EQ(e.address % kBlockSize, 0u);
        segments[e.address] = e.address + e.size;
        break;
      case EventKind::kFree:
        ASSERT_EQ(segments.erase(e.address), 1u);
        break;
      case EventKind::kActivate: {
        ASSERT_TRUE(inside(segments, e.address, e.size));
        auto next = active.lower_bound(e.address);
        ASSERT_TRUE(next == active.end() || next->first >= e.address + e.size)
            << "activation overlaps an active range";
        ASSERT_TRUE(next == active.begin() || std::prev(next)->second <= e.address)
            << "activation overlaps an active range";
        active[e.address] = e.address + e.size;
        break;
      }
      case EventKind::kDeactivate: {
        auto it = active.find(e.address);
        ASSERT_NE(it, active.end()) << "deactivating a range that is not active";
        ASSERT_EQ(it->second, e.address + e.size) << "deactivation of a different size";
        active.erase(it);
        ASSERT_FALSE(in_kernel) << "tensors are freed between kernels";
        break;
      }
      case EventKind::kKernelBegin:
        in_kernel = true;
        break;
      case EventKind::kKernelEnd:
        in_kernel = false;
        break;
      case EventKind::kAccess:
        ASSERT_TRUE(in_kernel);
        ASSERT_GT(e.size, 0u);
        ASSERT_TRUE(inside(active, e.address, e.size))
            << "access to inactive bytes at " << e.address;
        ++accesses;
        break;
      default:
        break;
    }
  }
  EXPECT_GT(accesses, 0);
}

TEST_P(MlpStructureTest, KernelsAreDefinedOnceAndBalanced) {
  std::unique_ptr<Workload> workload = MakeMlp(GetParam());
  ASSERT_NE(workload, nullptr);
  std::set<uint32_t> defined;
  std::set<std::string> names;
  uint32_t open = 0;  // the running kernel, 0 for none
  int begins = 0;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kKernelDefine) {
      // Ids in order of first appearance, from 1; one name per id.
      ASSERT_EQ(e.exec_id, defined.size() + 1);
      ASSERT_TRUE(names.insert(e.name).second) << e.name;
      defined.insert(e.exec_id);
      ASSERT_EQ(open, 0u);
    } else if (e.kind == EventKind::kKernelBegin) {
      ASSERT_EQ(open, 0u) << "kernels do not nest";
      ASSERT_TRUE(defined.count(e.exec_id)) << "begin before define";
      ASSERT_GE(e.duration_ns, 1000);
      open = e.exec_id;
      ++begins;
    } else if (e.kind == EventKind::kKernelEnd) {
      ASSERT_EQ(e.exec_id, open);
      open = 0;
    }
  }
  EXPECT_EQ(open, 0u);
  EXPECT_GT(begins, 0);
}

TEST_P(MlpStructureTest, EveryIterationRunsTheSameKernels) {
  std::unique_ptr<Workload> workload = MakeMlp(GetParam());
  ASSERT_NE(workload, nullptr);
  std::vector<std::vector<uint32_t>> per_iteration;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kIterationBegin) {
      ASSERT_EQ(e.iteration, per_iteration.size());
      per_iteration.emplace_back();
    } else if (e.kind == EventKind::kKernelBegin && !per_iteration.empty()) {
      per_iteration.back().push_back(e.exec_id);
    }
  }
  const auto* mlp = dynamic_cast<const MlpWorkload*>(workload.get());
  ASSERT_NE(mlp, nullptr);
  ASSERT_EQ(per_iteration.size(), static_cast<size_t>(mlp->options().iterations));
  // 2 per layer forward, loss forward and backward, 4 per layer backward but
  // no input gradient for layer 0, one optimizer step per parameter.
  EXPECT_EQ(per_iteration[0].size(), static_cast<size_t>(8 * mlp->options().layers + 1));
  for (const std::vector<uint32_t>& ids : per_iteration) {
    EXPECT_EQ(ids, per_iteration[0]);
  }
}

TEST_P(MlpStructureTest, SavedActivationsAreReadInBackward) {
  std::unique_ptr<Workload> workload = MakeMlp(GetParam());
  ASSERT_NE(workload, nullptr);
  absl::flat_hash_map<uint32_t, std::string> names;
  std::string kernel;             // the running kernel's name
  bool backward = false;          // past the loss in this iteration
  std::set<uint64_t> saved;       // ReLU outputs of this iteration, by address
  std::set<uint64_t> read_in_backward;
  int checked = 0;
  for (const Event& e : Drain(*workload)) {
    switch (e.kind) {
      case EventKind::kIterationBegin:
        ASSERT_TRUE(saved.empty()) << "an activation outlived its iteration";
        backward = false;
        read_in_backward.clear();
        break;
      case EventKind::kKernelDefine:
        names[e.exec_id] = e.name;
        break;
      case EventKind::kKernelBegin:
        kernel = names[e.exec_id];
        if (absl::StartsWith(kernel, "mse_loss_bwd")) backward = true;
        if (absl::StartsWith(kernel, "adam_step") || absl::StartsWith(kernel, "sgd_step")) {
          backward = false;
        }
        break;
      case EventKind::kAccess:
        if (absl::StartsWith(kernel, "bias_relu_fwd") && e.access == AccessType::kWrite) {
          saved.insert(e.address);
        }
        if (backward && e.access == AccessType::kRead) read_in_backward.insert(e.address);
        break;
      case EventKind::kDeactivate:
        if (saved.erase(e.address) != 0) {
          EXPECT_TRUE(read_in_backward.count(e.address))
              << "activation at " << e.address << " freed without a backward read";
          ++checked;
        }
        break;
      default:
        break;
    }
  }
  EXPECT_TRUE(saved.empty());
  const auto* mlp = dynamic_cast<const MlpWorkload*>(workload.get());
  EXPECT_EQ(checked, mlp->options().layers * mlp->options().iterations);
}

INSTANTIATE_TEST_SUITE_P(Configurations, MlpStructureTest,
                         ::testing::ValuesIn(kConfigurations));

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

TEST(MlpWorkloadTest, RejectsBadParameters) {
  for (const char* spec : {"mlp:layers=0", "mlp:precision=fp8", "mlp:optimizer=lamb",
                           "mlp:batch=-1", "mlp:iterations=0", "mlp:hidden=1000000000"}) {
    absl::StatusOr<std::unique_ptr<Workload>> workload =
        Workloads().Create(spec, ComputeSpec{});
    EXPECT_EQ(workload.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

}  // namespace
}  // namespace umlab
