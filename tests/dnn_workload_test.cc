// The DNN training zoo: parameter counts against the published models, and
// the structure of the streamed program (determinism, lifetimes, stable
// execution ids) on small configurations.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/workload_events.h"
#include "core/memory_units.h"
#include "core/tensor_role.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;

using ::umlab::testing::Drain;
using ::umlab::testing::MakeWorkload;

std::unique_ptr<Workload> Make(const std::string& spec) { return testing::MakeWorkload(spec); }

// Trainable parameters as the reference implementations count them
// (sum(p.numel() for p in model.parameters())).
struct ParameterCount {
  const char* spec;
  uint64_t parameters;
};

class ParameterCountTest : public ::testing::TestWithParam<ParameterCount> {};

TEST_P(ParameterCountTest, MatchesTheReferenceImplementation) {
  std::unique_ptr<Workload> workload = Make(GetParam().spec);
  ASSERT_NE(workload, nullptr);
  const auto* dnn = dynamic_cast<const DnnWorkload*>(workload.get());
  ASSERT_NE(dnn, nullptr);
  EXPECT_EQ(dnn->trainable_parameters(), GetParam().parameters) << GetParam().spec;
}

INSTANTIATE_TEST_SUITE_P(
    Models, ParameterCountTest,
    ::testing::Values(
        // HuggingFace GPT2LMHeadModel (lm_head tied to wte).
        ParameterCount{"gpt2-small:batch=1,seq=8", 124'439'808},
        ParameterCount{"gpt2-medium:batch=1,seq=8", 354'823'168},
        ParameterCount{"gpt2-large:batch=1,seq=8", 774'030'080},
        ParameterCount{"gpt2-xl:batch=1,seq=8", 1'557'611'200},
        // HuggingFace BertForMaskedLM (decoder tied to the word embeddings).
        ParameterCount{"bert-base:batch=1,seq=8", 109'514'298},
        ParameterCount{"bert-large:batch=1,seq=8", 335'174'458},
        // torchvision resnet50 / resnet152 / mobilenet_v2, timm vit_*_patch16_224.
        ParameterCount{"resnet50:batch=1", 25'557'032},
        ParameterCount{"resnet152:batch=1", 60'192'808},
        // timm resnet200 (torchvision has no 200-layer model).
        ParameterCount{"resnet200:batch=1", 64'673'832},
        ParameterCount{"mobilenet:batch=1", 3'504'872},
        ParameterCount{"vit-b:batch=1", 86'567'656},
        ParameterCount{"vit-l:batch=1", 304'326'632}));

TEST(DlrmTest, EmbeddingTablesHoldMostParameters) {
  std::unique_ptr<Workload> workload = Make("dlrm:batch=16");
  ASSERT_NE(workload, nullptr);
  const auto* dnn = dynamic_cast<const DnnWorkload*>(workload.get());
  // 33,762,577 Criteo Kaggle rows of dimension 128, plus the MLPs.
  const uint64_t tables = 33'762'577ull * 128;
  const uint64_t bottom = 13 * 512 + 512 + 512 * 256 + 256 + 256 * 128 + 128;
  const uint64_t top = 479 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512 +
                       512 * 256 + 256 + 256 * 1 + 1;
  EXPECT_EQ(dnn->trainable_parameters(), tables + bottom + top);
}

// Small configurations of every generator, for the structural checks; mlp
// with the variants that change its sizes, pools and optimizer.
const char* const kConfigurations[] = {
    "mlp",
    "mlp:layers=1,hidden=512,batch=64,iterations=3,optimizer=sgd",
    "mlp:layers=3,hidden=1000,batch=100,iterations=2,precision=fp16",
    "mlp:layers=2,hidden=64,batch=8,iterations=2,precision=bf16,optimizer=sgd",
    "gpt2-small:batch=1,seq=16,iterations=3",
    "gpt2-small:batch=1,seq=16,iterations=2,attention=eager,foreach=false",
    "resnet50:batch=2,image=32,iterations=2,optimizer=adam,foreach=false",
    "bert-base:batch=2,seq=16,iterations=2,optimizer=sgd",
    "vit-b:batch=2,image=32,iterations=2,precision=bf16",
    "resnet50:batch=2,image=32,iterations=2",
    "mobilenet:batch=2,image=32,iterations=2,classes=100,precision=fp16",
    "dlrm:batch=64,iterations=3",
    "gpt2-small:batch=1,seq=16,iterations=2,precision=fp16,offload=true",
    "dlrm:batch=64,iterations=2,offload=true",
};

class DnnStructureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DnnStructureTest, StreamsAreIdentical) {
  std::unique_ptr<Workload> workload = Make(GetParam());
  ASSERT_NE(workload, nullptr);
  const std::vector<Event> first = Drain(*workload);
  const std::vector<Event> second = Drain(*workload);
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second);
}

// Segments come whole blocks at a time, tensors live inside them without
// overlapping, are freed between kernels, and every access stays inside a
// live tensor.
TEST_P(DnnStructureTest, AccessesTouchOnlyActiveRanges) {
  std::unique_ptr<Workload> workload = Make(GetParam());
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

// Each id is defined once, with a name of its own, before its first begin; kernels do not nest and take at least the roofline's
// 1 us floor.
TEST_P(DnnStructureTest, KernelsAreDefinedOnceAndBalanced) {
  std::unique_ptr<Workload> workload = Make(GetParam());
  ASSERT_NE(workload, nullptr);
  std::set<uint32_t> defined;
  std::set<std::string> names;
  uint32_t open = 0;  // the running kernel, 0 for none
  int begins = 0;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kKernelDefine) {
      ASSERT_NE(e.exec_id, 0u);
      ASSERT_TRUE(defined.insert(e.exec_id).second) << "defined twice: " << e.exec_id;
      ASSERT_TRUE(names.insert(e.name).second) << e.name;
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

TEST_P(DnnStructureTest, EveryIterationRunsTheSameKernels) {
  std::unique_ptr<Workload> workload = Make(GetParam());
  ASSERT_NE(workload, nullptr);
  std::vector<std::vector<uint32_t>> iterations;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kIterationBegin) {
      ASSERT_EQ(e.iteration, iterations.size());
      iterations.emplace_back();
    }
    if (e.kind == EventKind::kKernelBegin && !iterations.empty()) {
      iterations.back().push_back(e.exec_id);
    }
  }
  ASSERT_GE(iterations.size(), 2u);
  ASSERT_FALSE(iterations[0].empty());
  for (size_t i = 1; i < iterations.size(); ++i) {
    EXPECT_EQ(iterations[i], iterations[0]);
  }
}

// Every tensor still alive when backward starts and born in this iteration
// (saved activations, masks, statistics, the batch) is read by a backward
// kernel before it is freed: nothing is kept that backward does not need.
// Backward starts at the training graph's seed, or at mlp's loss gradient.
TEST_P(DnnStructureTest, SavedTensorsAreReadInBackward) {
  std::unique_ptr<Workload> workload = Make(GetParam());
  ASSERT_NE(workload, nullptr);
  absl::flat_hash_map<uint32_t, std::string> names;
  std::map<uint64_t, uint64_t> born;     // this iteration's live blocks: start -> end
  std::map<uint64_t, uint64_t> pending;  // alive at the backward seed, not yet read
  bool in_backward = false;
  int saved = 0, checked_iterations = 0;
  for (const Event& e : Drain(*workload)) {
    switch (e.kind) {
      case EventKind::kIterationBegin:
        EXPECT_TRUE(pending.empty()) << pending.size() << " saved tensors never read";
        born.clear();
        pending.clear();
        in_backward = false;
        break;
      case EventKind::kActivate:
        born[e.address] = e.address + e.size;
        break;
      case EventKind::kDeactivate:
        born.erase(e.address);
        if (pending.erase(e.address) != 0) ADD_FAILURE() << "saved block freed unread";
        break;
      case EventKind::kKernelDefine:
        names[e.exec_id] = e.name;
        break;
      case EventKind::kKernelBegin:
        if (!in_backward && (absl::EndsWith(names[e.exec_id], ".backward_seed") ||
                             absl::StartsWith(names[e.exec_id], "mse_loss_bwd"))) {
          in_backward = true;
          ++checked_iterations;
          for (const auto& [start, end] : born) {
            if (end - start > 512) pending[start] = end;  // not the scalar loss
          }
          saved += static_cast<int>(pending.size());
        }
        break;
      case EventKind::kAccess:
        if (in_backward && e.access == AccessType::kRead) {
          auto it = pending.upper_bound(e.address);
          if (it != pending.begin() && std::prev(it)->second > e.address) pending.erase(std::prev(it));
        }
        break;
      default:
        break;
    }
  }
  EXPECT_TRUE(pending.empty());
  EXPECT_GE(checked_iterations, 2);
  EXPECT_GT(saved, 0);
}

INSTANTIATE_TEST_SUITE_P(Configurations, DnnStructureTest, ::testing::ValuesIn(kConfigurations));

TEST(DnnWorkloadTest, DescribePrintsTheFootprint) {
  std::unique_ptr<Workload> workload = Make("gpt2-small:batch=1,seq=64,iterations=1");
  ASSERT_NE(workload, nullptr);
  const std::string description = workload->Describe();
  for (const char* line : {"trainable parameters 124.4 M", "parameters", "optimizer state",
                           "peak activations", "peak reserved", "per iteration"}) {
    EXPECT_THAT(description, HasSubstr(line));
  }
  const auto* dnn = dynamic_cast<const DnnWorkload*>(workload.get());
  absl::StatusOr<ProgramFootprint> f = dnn->Footprint();
  ASSERT_TRUE(f.ok()) << f.status();
  // fp32 Adam: two moments per parameter, 4 bytes each.
  EXPECT_EQ(f->optimizer_state_bytes, 2 * f->parameter_bytes);
  EXPECT_EQ(f->parameter_bytes, 124'439'808ull * 4);
  EXPECT_GE(f->peak_reserved_bytes, f->peak_allocated_bytes);
}

TEST(DnnWorkloadTest, OffloadRunsTheStepOnTheHostOnePassPerParameter) {
  // ZeRO-Offload: no optimizer state in managed memory and no optimizer
  // kernel on the GPU; one host kernel per parameter reads its gradient and
  // writes it, for as long as the CPU takes to move the gradient, the fp32
  // master weight and Adam's two moments (each read and written) and the
  // parameter through host memory.
  ComputeSpec compute;
  compute.host_memory_bytes_per_second = 100e9;
  std::unique_ptr<Workload> workload =
      MakeWorkload("gpt2-small:batch=1,seq=8,iterations=1,precision=fp16,offload=true", compute);
  ASSERT_NE(workload, nullptr);
  const std::vector<Event> events = Drain(*workload);
  absl::flat_hash_map<uint32_t, std::string> host_kernels;
  std::map<uint32_t, std::vector<Event>> accesses;
  std::map<uint32_t, Nanos> duration;
  uint32_t running = 0;
  int optimizer_state_tensors = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::kKernelDefine && e.cause == uint8_t(KernelPlace::kHost)) {
      host_kernels[e.exec_id] = e.name;
    }
    if (e.kind == EventKind::kActivate && e.cause == uint8_t(TensorRole::kOptimizerState) + 1) {
      ++optimizer_state_tensors;
    }
    if (e.kind == EventKind::kKernelBegin) {
      running = e.exec_id;
      duration[running] = e.duration_ns;
    }
    if (e.kind == EventKind::kAccess && host_kernels.contains(running)) {
      accesses[running].push_back(e);
    }
  }
  EXPECT_EQ(optimizer_state_tensors, 0);
  // GPT-2 small's 148 parameter tensors (the optimizer loops over them).
  ASSERT_EQ(host_kernels.size(), 148u);
  for (const auto& [id, name] : host_kernels) {
    EXPECT_THAT(name, HasSubstr("cpu_adam_"));
    ASSERT_EQ(accesses[id].size(), 2u) << name;
    const Event& grad = accesses[id][0];
    const Event& param = accesses[id][1];
    EXPECT_EQ(grad.access, AccessType::kRead);
    EXPECT_EQ(param.access, AccessType::kWrite);
    EXPECT_EQ(grad.size, param.size);
    // 2 + 2 bytes of gradient and parameter, 24 of fp32 state, per element.
    const double bytes = double(param.size) / 2 * 28;
    EXPECT_EQ(duration[id], std::max<Nanos>(1000, Nanos(std::ceil(bytes / 100e9 * 1e9)))) << name;
  }
}

TEST(DnnWorkloadTest, HalfPrecisionHalvesTheParameters) {
  std::unique_ptr<Workload> full = Make("bert-base:batch=1,seq=8,iterations=1");
  std::unique_ptr<Workload> half = Make("bert-base:batch=1,seq=8,iterations=1,precision=fp16");
  ASSERT_NE(full, nullptr);
  ASSERT_NE(half, nullptr);
  absl::StatusOr<ProgramFootprint> f = dynamic_cast<const DnnWorkload&>(*full).Footprint();
  absl::StatusOr<ProgramFootprint> h = dynamic_cast<const DnnWorkload&>(*half).Footprint();
  ASSERT_TRUE(f.ok() && h.ok());
  EXPECT_EQ(f->parameter_bytes, 2 * h->parameter_bytes);
}

TEST(DnnWorkloadTest, EmbeddingRowsChangeEveryIterationButNotAcrossRuns) {
  std::unique_ptr<Workload> workload = Make("dlrm:batch=256,iterations=2");
  ASSERT_NE(workload, nullptr);
  absl::flat_hash_map<uint32_t, std::string> names;
  std::vector<std::vector<uint64_t>> rows(2);  // per iteration, table 2's touched rows
  int iteration = -1;
  uint32_t current = 0;
  for (const Event& e : Drain(*workload)) {
    if (e.kind == EventKind::kIterationBegin) iteration = static_cast<int>(e.iteration);
    if (e.kind == EventKind::kKernelDefine) names[e.exec_id] = e.name;
    if (e.kind == EventKind::kKernelBegin) current = e.exec_id;
    if (e.kind == EventKind::kAccess && iteration >= 0 &&
        absl::StartsWith(names[current], "emb_l.2.embedding_fwd") && e.size == 512) {
      rows[iteration].push_back(e.address);
    }
  }
  // Table 2 has 10 M rows: 256 power-law draws touch many distinct rows,
  // some more than once (deduplicated), and a different set next batch.
  ASSERT_GT(rows[0].size(), 50u);
  EXPECT_LE(rows[0].size(), 256u);
  EXPECT_NE(rows[0], rows[1]);
}

TEST(DnnWorkloadTest, RejectsBadParameters) {
  for (const char* spec : {"gpt2-xl:batch=0", "gpt2-small:seq=2048", "bert-base:precision=fp8",
                           "resnet50:optimizer=lamb", "vit-b:image=100", "dlrm:zipf=0",
                           "mlp:layers=0", "mlp:precision=fp8", "mlp:optimizer=lamb",
                           "mlp:batch=-1", "mlp:iterations=0", "mlp:hidden=1000000000"}) {
    absl::StatusOr<std::unique_ptr<Workload>> workload =
        Workloads().Create(spec, ComputeSpec{});
    EXPECT_EQ(workload.status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

}  // namespace
}  // namespace umlab
