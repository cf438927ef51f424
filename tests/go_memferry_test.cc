// The go-memferry policy (GO-MemFerry, Yao et al. §IV-D; memferry.h with a
// gradient reserve) on the sim, on a hand-built training iteration whose
// answers can be worked out on paper, and its planner's order
// (go_memferry_planner.h).
//
// The program runs on the test device (4 SMs, 1 GB/s each way, no fixed
// costs, a 1 us remote round trip) with remote reads at a quarter of the
// copy rate, so that both layers' weights are worth copying in (GFGB) and
// the gradients are the only thing the reserve changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/engine_observer.h"
#include "core/tensor_role.h"
#include "policies/memferry/go_memferry_planner.h"
#include "policies/memferry/layer_table_builder.h"
#include "policies/memferry/memferry.h"
#include "tests/memferry_support.h"
#include "tests/sim_harness.h"
#include "tests/umlab_in_process.h"

namespace umlab::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1000 * kUs;
constexpr Nanos kBlockWrite = 2097152;  // 2 MiB at 1 GB/s

uint64_t At(int block) { return ProgramBuilder::BlockAddress(block); }
BlockNumber Block(int block) { return BlockOfAddress(At(block)); }

// Where things are, a block each: the two layers' weights, the
// activations, X (an activation of the forward whose block the caching
// allocator gives a's gradient in the backward), b's gradient, the
// activation gradients and the optimizer state.
enum Blocks : int {
  kWeightA = 0,
  kWeightB,
  kActivations,
  kXThenGradientA,
  kGradientB,
  kActivationGradients,
  kOptimizerState,
  kBlocks,
};

enum Kernels : uint32_t {
  kAForward = 10,
  kBForward,
  kLossSeed,
  kBWgrad,
  kBDgrad,
  kAWgrad,
  kStep,
  kStepA,
  kStepB,
};

// How long each layer's weight gradient kernel computes. Writing a 2 MiB
// gradient to the host takes 2.1 ms on the test link: a wgrad computing
// longer hides it, a short one waits for it.
struct Wgrads {
  Nanos a = 100 * kUs;
  Nanos b = 100 * kUs;
  // Named after their layer (`a.gemm_wgrad`), as the zoo's generators name
  // kernels, or not (`gemm_wgrad_a`, as mlp does).
  bool named = true;
};

// Two Linear layers a and b, trained for `iterations`: forward a, b; the
// loss's seed; b's wgrad and dgrad; a's wgrad; a step on the device that
// reads the gradients and updates the weights, in one kernel or one per
// parameter; then zero_grad.
ProgramBuilder TwoLayers(int iterations, const Wgrads& wgrads = Wgrads(),
                         bool step_per_parameter = false) {
  ProgramBuilder p;
  for (const auto& [id, name] : std::vector<std::pair<uint32_t, std::string>>{
           {kAForward, "a.gemm_fwd"},
           {kBForward, "b.gemm_fwd"},
           {kLossSeed, "loss.backward_seed"},
           {kBWgrad, wgrads.named ? "b.gemm_wgrad" : "gemm_wgrad_b"},
           {kBDgrad, "b.gemm_dgrad"},
           {kAWgrad, wgrads.named ? "a.gemm_wgrad" : "gemm_wgrad_a"},
           {kStep, "optimizer.step"},
           {kStepA, "adam_step_a"},
           {kStepB, "adam_step_b"}}) {
    NameKernel(p, id, name);
  }
  const uint64_t page = kPageSize;
  p.Alloc(0, kBlocks);
  p.Activate(At(kWeightA), kBlockSize, ActivateCause(TensorRole::kParameter));
  p.Activate(At(kWeightB), kBlockSize, ActivateCause(TensorRole::kParameter));
  p.Activate(At(kOptimizerState), kBlockSize, ActivateCause(TensorRole::kOptimizerState));
  const uint64_t act = At(kActivations);
  const uint64_t x = At(kXThenGradientA);
  const uint64_t grad_a = At(kXThenGradientA);
  const uint64_t grad_b = At(kGradientB);
  const uint64_t dact = At(kActivationGradients);
  for (int i = 0; i < iterations; ++i) {
    p.Iteration(static_cast<uint64_t>(i));
    p.Activate(act, kBlockSize, ActivateCause(TensorRole::kActivation));
    p.Activate(x, kBlockSize, ActivateCause(TensorRole::kActivation));
    p.Begin(kAForward, 1 * kMs).Access(At(kWeightA), kBlockSize, false);
    p.Access(x, kBlockSize, true).End(kAForward);
    p.Begin(kBForward, 1 * kMs).Access(At(kWeightB), kBlockSize, false);
    p.Access(x, kBlockSize, false).Access(act, page, true).End(kBForward);
    p.Deactivate(x, kBlockSize);
    p.Activate(dact, kBlockSize, ActivateCause(TensorRole::kGradient));
    p.Begin(kLossSeed, 10 * kUs).Access(act, page, false).Access(dact, page, true);
    p.End(kLossSeed);
    p.Activate(grad_b, kBlockSize, ActivateCause(TensorRole::kGradient));
    p.Begin(kBWgrad, wgrads.b).Access(dact, page, false).Access(act, page, false);
    p.Access(grad_b, kBlockSize, true).End(kBWgrad);
    p.Begin(kBDgrad, 1 * kMs).Access(At(kWeightB), kBlockSize, false);
    p.Access(dact, page, false).Access(dact + page, page, true).End(kBDgrad);
    p.Activate(grad_a, kBlockSize, ActivateCause(TensorRole::kGradient));
    p.Begin(kAWgrad, wgrads.a).Access(dact + page, page, false);
    p.Access(grad_a, kBlockSize, true).End(kAWgrad);
    if (step_per_parameter) {
      for (const auto& [step, grad, weight] : {std::tuple{kStepA, grad_a, At(kWeightA)},
                                               std::tuple{kStepB, grad_b, At(kWeightB)}}) {
        p.Begin(step, 50 * kUs).Access(At(kOptimizerState), kBlockSize, false);
        p.Access(grad, kBlockSize, false).Access(weight, kBlockSize, true).End(step);
      }
    } else {
      p.Begin(kStep, 100 * kUs).Access(At(kOptimizerState), kBlockSize, false);
      p.Access(grad_a, kBlockSize, false).Access(grad_b, kBlockSize, false);
      p.Access(At(kWeightA), kBlockSize, true).Access(At(kWeightB), kBlockSize, true);
      p.Access(At(kOptimizerState), kBlockSize, true).End(kStep);
    }
    p.Deactivate(grad_a, kBlockSize).Deactivate(grad_b, kBlockSize);
    p.Deactivate(act, kBlockSize).Deactivate(dact, kBlockSize);
  }
  return p;
}

uint64_t Count(const std::map<std::string, PolicyStats::Value>& stats, const std::string& name) {
  return std::get<uint64_t>(stats.at(name));
}

// The most bytes of the gradients' blocks the device held (resident or
// arriving) for live tensors, from the loss's backward seed to the
// iteration's end: the gradients' device memory (X, which holds a's block in
// the forward, is freed before the seed). Also each kernel's duration.
class GradientWatch final : public EngineObserver {
 public:
  void OnIterationBegin(uint64_t /*index*/, Nanos /*now*/) override { watching_ = false; }
  void OnKernelBegin(uint32_t exec_id, Nanos now) override {
    if (exec_id == kLossSeed) watching_ = true;
    begun_[exec_id] = now;
  }
  void OnKernelEnd(uint32_t exec_id, Nanos now) override {
    durations[exec_id].push_back(now - begun_[exec_id]);
  }
  void OnStep(const Engine& engine, Nanos /*now*/) override {
    if (!watching_) return;
    uint64_t bytes[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const int block = i == 0 ? kXThenGradientA : kGradientB;
      if (const BlockState* state = engine.memory_state().Find(Block(block)); state != nullptr) {
        bytes[i] = MaskBytes((state->resident | state->in_flight) & ~state->inactive);
      }
    }
    peak_a = std::max(peak_a, bytes[0]);
    peak_b = std::max(peak_b, bytes[1]);
    peak = std::max(peak, bytes[0] + bytes[1]);
  }

  uint64_t peak = 0, peak_a = 0, peak_b = 0;
  std::map<uint32_t, std::vector<Nanos>> durations;

 private:
  bool watching_ = false;
  std::map<uint32_t, Nanos> begun_;
};

// --- Reading the program ---

TEST(GoMemferryLayerTableTest, AGradientIsWhatTheStepReadsAndItsHostWriteIsCharged) {
  const ProgramGraph graph = Graph(TwoLayers(1, Wgrads{5 * kMs, 100 * kUs}));
  const DeviceConfig device = SlowRemoteDevice();
  absl::StatusOr<ProgramLayers> layers =
      BuildLayerTable(graph.iterations[0], graph.kernel_names, device);
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->gradients.size(), 2u);
  const IterationGraph& iteration = graph.iterations[0];
  // Each layer's gradient is the one tensor its wgrad writes; the
  // activation gradients (written by the seed and b's dgrad, read by no
  // step) are no layer's.
  for (const auto& [layer, block] : {std::pair{0, kXThenGradientA}, std::pair{1, kGradientB}}) {
    const LayerGradients& gradients = layers->gradients[static_cast<size_t>(layer)];
    ASSERT_EQ(gradients.tensors.size(), 1u) << layer;
    const GraphTensor& tensor = iteration.tensors[gradients.tensors[0]];
    EXPECT_EQ(tensor.address, At(block));
    EXPECT_EQ(tensor.role, TensorRole::kGradient);
    EXPECT_EQ(gradients.bytes, kBlockSize);
    EXPECT_EQ(gradients.link, 0);  // written the other way on a full-duplex link
  }
  // b's wgrad computes 100 us and now waits for its 2 MiB to cross at 1 GB/s
  // and the round trip; a's computes 5 ms, which hides the write.
  const LayerCosts& a = layers->table.layers[0];
  const LayerCosts& b = layers->table.layers[1];
  EXPECT_NEAR(static_cast<double>(layers->gradients[1].backward - b.backward),
              static_cast<double>(kBlockWrite + 1 * kUs - 100 * kUs), 0.05 * kBlockWrite);
  EXPECT_LT(layers->gradients[0].backward - a.backward, 10 * kUs);
  EXPECT_GE(layers->gradients[0].backward, a.backward);
  // With the parameters remote as well, the write adds on top.
  EXPECT_GT(layers->gradients[1].backward_from_host, b.backward_from_host);
}

TEST(GoMemferryLayerTableTest, AGradientNoLayerWritesIsTheLayersItsStepUpdates) {
  // wgrads named after no layer: a step kernel per parameter says whose
  // gradient each is; one step updating both layers says nothing, and the
  // gradients are no layer's (paged on demand).
  const DeviceConfig device = SlowRemoteDevice();
  for (const bool per_parameter : {true, false}) {
    SCOPED_TRACE(per_parameter);
    const ProgramGraph graph = Graph(TwoLayers(1, Wgrads{.named = false}, per_parameter));
    absl::StatusOr<ProgramLayers> layers =
        BuildLayerTable(graph.iterations[0], graph.kernel_names, device);
    ASSERT_TRUE(layers.ok()) << layers.status();
    for (const auto& [layer, block] : {std::pair{0, kXThenGradientA}, std::pair{1, kGradientB}}) {
      const LayerGradients& gradients = layers->gradients[static_cast<size_t>(layer)];
      if (!per_parameter) {
        EXPECT_TRUE(gradients.tensors.empty()) << layer;
        continue;
      }
      ASSERT_EQ(gradients.tensors.size(), 1u) << layer;
      EXPECT_EQ(graph.iterations[0].tensors[gradients.tensors[0]].address, At(block));
    }
    // A wgrad of no layer adds its host write to its gradient's layer.
    if (per_parameter) {
      EXPECT_GT(layers->gradients[1].backward - layers->table.layers[1].backward, kBlockWrite / 2);
    }
  }
}

// --- Carrying out a plan ---

TEST(GoMemferryPolicyTest, WithNoReserveNoGradientIsEverOnTheDevice) {
  constexpr int kIterations = 3;
  std::unique_ptr<Policy> policy = MakePolicy("go-memferry");  // reserve 0, the paper's default
  GradientWatch watch;
  const SimRun run = RunOnSim(TwoLayers(kIterations), 16, *policy, SlowRemoteDevice(),
                              ReplayPolicy::kBatch, SimOptions{}, &watch);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const MemferryPolicy& go = AsMemferry(*policy);
  EXPECT_THAT(go.plan().modes, ElementsAre(ExecutionMode::kGfgb, ExecutionMode::kGfgb));
  EXPECT_THAT(go.gradient_plan().gradients.keep_in_device, ElementsAre(false, false));

  EXPECT_EQ(watch.peak, 0u);
  // Every gradient byte was written over the link, once per iteration, and
  // read back by the step.
  EXPECT_EQ(run.stats.remote_write_bytes, kIterations * 2 * kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, kIterations * 2 * kBlockSize);
  // The only gradient pages the device held were the activation gradients'
  // two.
  EXPECT_LE(run.stats.peak_device_bytes_by_role[static_cast<size_t>(TensorRole::kGradient)],
            2 * kPageSize);
  const std::map<std::string, PolicyStats::Value> stats = StatsOf(*policy);
  EXPECT_EQ(Count(stats, "gradient_reserve_bytes"), 0u);
  EXPECT_EQ(Count(stats, "layers_gradients_offloaded"), 2u);
  EXPECT_EQ(Count(stats, "gradient_bytes_offloaded"), 2 * kBlockSize);
  EXPECT_EQ(Count(stats, "gradients_mapped"), kIterations * 2u);
  EXPECT_EQ(Count(stats, "gradient_bytes_found_on_device"), 0u);
  EXPECT_EQ(Count(stats, "peak_gradient_bytes_on_device"), 0u);
  EXPECT_EQ(Count(stats, "kernels_off_plan"), 0u);
}

TEST(GoMemferryPolicyTest, TheForwardFindsItsMemoryAsItWouldWithoutTheOffload) {
  // X holds a's gradient block in the forward. Each iteration it is dropped
  // when X is freed (so a's gradient can be mapped there), and populated
  // again when the next forward activates X over it: X is written without a
  // fault and nothing is copied, as under memferry.
  constexpr int kIterations = 3;
  std::unique_ptr<Policy> memferry = MakePolicy("memferry");
  std::unique_ptr<Policy> go = MakePolicy("go-memferry");
  const SimRun base = RunOnSim(TwoLayers(kIterations), 16, *memferry, SlowRemoteDevice());
  const SimRun run = RunOnSim(TwoLayers(kIterations), 16, *go, SlowRemoteDevice());
  ASSERT_TRUE(base.status.ok()) << base.status;
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.stats.per_iteration.size(), base.stats.per_iteration.size());
  for (size_t i = 1; i < run.stats.per_iteration.size(); ++i) {
    EXPECT_EQ(run.stats.per_iteration[i].faults, base.stats.per_iteration[i].faults) << i;
    EXPECT_EQ(run.stats.per_iteration[i].h2d_bytes, base.stats.per_iteration[i].h2d_bytes) << i;
  }
  EXPECT_EQ(run.stats.d2h_bytes, 0u);  // nothing dead is written back
  EXPECT_EQ(run.stats.invalidated_bytes, kIterations * kBlockSize);  // X's, when freed
}

TEST(GoMemferryPolicyTest, ItsEstimateOfAHostWriteIsTheSims) {
  std::unique_ptr<Policy> policy = MakePolicy("go-memferry");
  GradientWatch watch;
  const ProgramBuilder program = TwoLayers(2, Wgrads{5 * kMs, 100 * kUs});
  const SimRun run = RunOnSim(program, 16, *policy, SlowRemoteDevice(), ReplayPolicy::kBatch,
                              SimOptions{}, &watch);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const ProgramLayers& layers = AsMemferry(*policy).layers();
  // Both layers' backward is its wgrad and, for b, its dgrad (1 ms on the
  // device).
  for (const auto& [layer, wgrad] : {std::pair{0, kAWgrad}, std::pair{1, kBWgrad}}) {
    const Nanos dgrad = layer == 1 ? watch.durations.at(kBDgrad)[1] : 0;
    const Nanos measured = watch.durations.at(wgrad)[1] + dgrad;
    EXPECT_NEAR(static_cast<double>(layers.gradients[static_cast<size_t>(layer)].backward),
                static_cast<double>(measured), 0.01 * static_cast<double>(measured))
        << layer;
  }
}

TEST(GoMemferryPolicyTest, TheReserveBoundsTheGradientsOnTheDevice) {
  // Each gradient is a block, so a reserve of half keeps one: b's, whose
  // backward the host write slows by about 2 ms, where a's hides it.
  const ProgramBuilder program = TwoLayers(3, Wgrads{5 * kMs, 100 * kUs});
  for (const auto& [reserve, keeps_b] : {std::pair{"0.5", true}, std::pair{"0.4", false}}) {
    SCOPED_TRACE(reserve);
    std::unique_ptr<Policy> policy = MakePolicy(std::string("go-memferry:reserve=") + reserve);
    GradientWatch watch;
    const SimRun run = RunOnSim(program, 16, *policy, SlowRemoteDevice(), ReplayPolicy::kBatch,
                                SimOptions{}, &watch);
    ASSERT_TRUE(run.status.ok()) << run.status;
    const GradientOffloadPlan& plan = AsMemferry(*policy).gradient_plan().gradients;
    EXPECT_THAT(plan.keep_in_device, ElementsAre(false, keeps_b));
    EXPECT_LE(watch.peak, plan.reserve_bytes);
    EXPECT_EQ(watch.peak_a, 0u);
    EXPECT_EQ(watch.peak_b, keeps_b ? kBlockSize : 0u);
    EXPECT_EQ(run.stats.remote_write_bytes, 3 * (keeps_b ? 1 : 2) * kBlockSize);
    const std::map<std::string, PolicyStats::Value> stats = StatsOf(*policy);
    EXPECT_EQ(Count(stats, "gradient_bytes_kept"), keeps_b ? kBlockSize : 0u);
    EXPECT_EQ(Count(stats, "peak_gradient_bytes_on_device"), watch.peak);
  }
}

TEST(GoMemferryPolicyTest, AFullReserveOnARoomyDeviceRunsAsMemferry) {
  std::unique_ptr<Policy> memferry = MakePolicy("memferry");
  std::unique_ptr<Policy> go = MakePolicy("go-memferry:reserve=1");
  const SimRun base = RunOnSim(TwoLayers(3), 16, *memferry, SlowRemoteDevice());
  const SimRun run = RunOnSim(TwoLayers(3), 16, *go, SlowRemoteDevice());
  ASSERT_TRUE(base.status.ok()) << base.status;
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_THAT(AsMemferry(*go).gradient_plan().gradients.keep_in_device, ElementsAre(true, true));
  EXPECT_EQ(AsMemferry(*go).plan().modes, AsMemferry(*memferry).plan().modes);
  EXPECT_EQ(run.stats.time_ns, base.stats.time_ns);
  EXPECT_EQ(run.stats.faults, base.stats.faults);
  EXPECT_EQ(run.stats.h2d_bytes, base.stats.h2d_bytes);
  EXPECT_EQ(run.stats.d2h_bytes, base.stats.d2h_bytes);
  EXPECT_EQ(run.stats.remote_write_bytes, 0u);
  EXPECT_EQ(run.stats.peak_device_bytes, base.stats.peak_device_bytes);
  // Both gradients on the device together, from a's wgrad to zero_grad.
  EXPECT_EQ(Count(StatsOf(*go), "peak_gradient_bytes_on_device"), 2 * kBlockSize);
}

// --- The planner's order ---

// Two layers of one page of gradient each. Keeping layer 0's gradient gains
// 20 ns with its parameters on the device and 5 under DHA; layer 1's gains
// 10 either way. A reserve of half keeps one.
ProgramLayers OrderLayers() {
  ProgramLayers layers;
  layers.table.layers.resize(2);
  layers.gradients.resize(2);
  for (size_t l = 0; l < 2; ++l) {
    LayerCosts& c = layers.table.layers[l];
    c.name = l == 0 ? "zero" : "one";
    c.forward = c.forward_from_host = 100;
    layers.gradients[l].bytes = kPageSize;
  }
  layers.table.layers[0].backward = 10;
  layers.table.layers[0].backward_from_host = 50;
  layers.gradients[0].backward = 30;
  layers.gradients[0].backward_from_host = 55;
  layers.table.layers[1].backward = 10;
  layers.table.layers[1].backward_from_host = 40;
  layers.gradients[1].backward = 20;
  layers.gradients[1].backward_from_host = 50;
  return layers;
}

TEST(GoMemferryPlannerTest, GradientsThenModesThenGradientsAgain) {
  const ProgramLayers layers = OrderLayers();
  LayerTable seen;
  uint64_t budget_seen = 0;
  absl::StatusOr<GoMemferryPlan> plan = PlanGoMemferry(
      layers, 0.5, 1 << 20, /*gradients_share_link=*/false,
      [&](const LayerTable& table, uint64_t budget) -> absl::StatusOr<MemferryPlan> {
        seen = table;
        budget_seen = budget;
        MemferryPlan modes;
        modes.modes = {ExecutionMode::kDha, ExecutionMode::kGfgb};
        return modes;
      });
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 1. With every layer on the device, layer 0 gains more: it keeps its
  // gradient, and the modes are planned with layer 1's on the host...
  EXPECT_THAT(plan->first_gradients.keep_in_device, ElementsAre(true, false));
  EXPECT_EQ(seen.layers[0].backward, 10);
  EXPECT_EQ(seen.layers[1].backward, 20);
  EXPECT_EQ(seen.layers[1].backward_from_host, 50);
  // 2. ... within the budget less the reserve's page.
  EXPECT_EQ(budget_seen, (1u << 20) - kPageSize);
  EXPECT_EQ(plan->parameter_budget_bytes, (1u << 20) - kPageSize);
  // 3. Layer 0 went DHA, where keeping its gradient gains 5 to layer 1's
  // 10: the gradients are planned again and swap.
  EXPECT_THAT(plan->gradients.keep_in_device, ElementsAre(false, true));
  EXPECT_EQ(plan->gradients_replanned, 2);
  // The predicted backward is the final plan's: layer 1 on the device with
  // its gradient (10), layer 0 by DHA writing its gradient to the host (55).
  EXPECT_EQ(plan->modes.times.backward_time, 10 + 55);
}

TEST(GoMemferryPlannerTest, GradientCostsFollowTheModes) {
  const ProgramLayers layers = OrderLayers();
  const std::vector<GradientCosts> costs =
      GradientCostsUnder(layers, {ExecutionMode::kDha, ExecutionMode::kDfgb});
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0].backward_in_device, 50);  // DHA: T_CBP reads the parameters remotely
  EXPECT_EQ(costs[0].backward_to_host, 55);
  EXPECT_EQ(costs[1].backward_in_device, 10);  // DFGB: its backward is on the device
  EXPECT_EQ(costs[1].backward_to_host, 20);
  EXPECT_EQ(costs[1].gradient_bytes, kPageSize);
}

// --- The zoo, through the command line ---

TEST(GoMemferryCliTest, RunsGpt2SmallEndToEnd) {
  const Outcome outcome =
      Umlab({"run", "--workload=gpt2-small", "--workload-arg=batch=1,iterations=2",
             "--policy=go-memferry", "--backend=sim", "--capacity=1.0", "--format=json"});
  ASSERT_EQ(outcome.code, 0) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr("\"gradient_bytes_kept\":0"));
  EXPECT_THAT(outcome.out, HasSubstr("\"kernels_off_plan\":0"));
  EXPECT_THAT(outcome.out, ::testing::Not(HasSubstr("\"layers_gradients_offloaded\":0")));
}

}  // namespace
}  // namespace umlab::testing
