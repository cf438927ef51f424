// The memferry policy (policies/memferry/memferry.h) on the sim, on
// hand-built programs whose answers can be worked out on paper, and its
// reading of a program as layers (layer_table_builder.h), checked against
// what the sim then does.
//
// The programs run on the test device (4 SMs, 1 GB/s each way, no fixed
// costs, a 1 us remote round trip) with remote reads at a quarter of the
// copy rate: reading a whole weight through a mapping then costs more than
// copying it, as a GEMM's re-reads make it cost on a GPU, so the planner
// has a reason to copy some layers in. These tests are about what the
// policy does with a plan, not about which plan the zoo's models get.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/engine_observer.h"
#include "core/tensor_role.h"
#include "policies/memferry/layer_table_builder.h"
#include "policies/memferry/memferry.h"
#include "tests/memferry_support.h"
#include "tests/offload_program.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"
#include "tests/umlab_in_process.h"

namespace umlab::testing {
namespace {

using ::testing::HasSubstr;

constexpr Nanos kUs = 1000;
constexpr Nanos kMs = 1000 * kUs;
constexpr Nanos kBlockCopy = 2097152;  // 2 MiB at 1 GB/s

uint64_t At(int block) { return ProgramBuilder::BlockAddress(block); }
BlockNumber Block(int block) { return BlockOfAddress(At(block)); }

// Three layers of one 2 MiB weight each, in blocks 0-2, and a training
// iteration over them (activations in block 3, gradients in block 4):
//   e: an embedding. Its forward gathers one page of its table; its
//      backward (a tied output layer's dgrad, say) reads all of it.
//   d: a dense layer. Forward and dgrad read the whole weight, 5 ms each.
//   f: an embedding whose backward writes its gradient without reading the
//      table (the kernel is named under the layer, not by a weight read).
enum Kernels : uint32_t {
  kEForward = 10,
  kDForward,
  kFForward,
  kLossSeed,
  kFBackward,
  kDBackward,
  kEBackward,
  kStep,
  kGForward,
  kGBackward,
};

// Where ThreeLayers puts things: e's table first (one block unless asked
// for more), then d, f, the activations, the gradients, the optimizer state
// and g, a block each.
struct Layout {
  int e_blocks = 1;
  Nanos d_compute = 5 * kMs;  // d's forward and its dgrad each
  // A fourth layer g after f, an embedding whose forward and backward read
  // a page of its table each, and whose backward comes first.
  bool with_g = false;
  Nanos loss_compute = 10 * kUs;  // the loss's backward seed
  int d() const { return e_blocks; }
  int f() const { return e_blocks + 1; }
  int activations() const { return e_blocks + 2; }
  int gradients() const { return e_blocks + 3; }
  int optimizer_state() const { return e_blocks + 4; }
  int g() const { return e_blocks + 5; }
};

// `optimizer_step`: after the backward, a GPU step reads optimizer state
// and updates every weight, as the zoo's workloads do.
ProgramBuilder ThreeLayers(int iterations, bool optimizer_step = false,
                           const Layout& at = Layout()) {
  ProgramBuilder p;
  for (const auto& [id, name] : std::vector<std::pair<uint32_t, std::string>>{
           {kEForward, "e.embedding_fwd"},
           {kDForward, "d.gemm_fwd"},
           {kFForward, "f.embedding_fwd"},
           {kLossSeed, "loss.backward_seed"},
           {kFBackward, "f.embedding_bwd"},
           {kDBackward, "d.gemm_dgrad"},
           {kEBackward, "e.gemm_dgrad"},
           {kStep, "optimizer.step"},
           {kGForward, "g.embedding_fwd"},
           {kGBackward, "g.gemm_dgrad"}}) {
    NameKernel(p, id, name);
  }
  const uint64_t e_bytes = static_cast<uint64_t>(at.e_blocks) * kBlockSize;
  p.Alloc(0, at.g() + 1);
  p.Activate(At(0), e_bytes, ActivateCause(TensorRole::kParameter));
  p.Activate(At(at.d()), kBlockSize, ActivateCause(TensorRole::kParameter));
  p.Activate(At(at.f()), kBlockSize, ActivateCause(TensorRole::kParameter));
  if (optimizer_step) {
    p.Activate(At(at.optimizer_state()), kBlockSize,
               ActivateCause(TensorRole::kOptimizerState));
  }
  if (at.with_g) p.Activate(At(at.g()), kBlockSize, ActivateCause(TensorRole::kParameter));
  const uint64_t page = kPageSize;
  const uint64_t act = At(at.activations());
  const uint64_t grad = At(at.gradients());
  for (int i = 0; i < iterations; ++i) {
    p.Iteration(static_cast<uint64_t>(i));
    p.Activate(act, kBlockSize, ActivateCause(TensorRole::kActivation));
    p.Activate(grad, kBlockSize, ActivateCause(TensorRole::kGradient));
    p.Begin(kEForward, 10 * kUs).Access(At(0), page, false).Access(act, page, true);
    p.End(kEForward);
    p.Begin(kDForward, at.d_compute).Access(At(at.d()), kBlockSize, false);
    p.Access(act, page, false);
    p.Access(act + page, page, true).End(kDForward);
    p.Begin(kFForward, 10 * kUs).Access(At(at.f()), page, false).Access(act + 2 * page, page, true);
    p.End(kFForward);
    if (at.with_g) {
      p.Begin(kGForward, 10 * kUs).Access(At(at.g()), page, false);
      p.Access(act + 3 * page, page, true).End(kGForward);
    }
    p.Begin(kLossSeed, at.loss_compute).Access(grad, page, true).End(kLossSeed);
    if (at.with_g) {
      p.Begin(kGBackward, 10 * kUs).Access(At(at.g()), page, false);
      p.Access(grad, page, false).Access(grad + 4 * page, page, true).End(kGBackward);
    }
    p.Begin(kFBackward, 10 * kUs).Access(grad, page, false);
    p.Access(grad + page, page, true).End(kFBackward);
    p.Begin(kDBackward, at.d_compute).Access(At(at.d()), kBlockSize, false);
    p.Access(grad, page, false);
    p.Access(grad + 2 * page, page, true).End(kDBackward);
    p.Begin(kEBackward, 100 * kUs).Access(At(0), e_bytes, false).Access(grad, page, false);
    p.Access(grad + 3 * page, page, true).End(kEBackward);
    if (optimizer_step) {
      p.Begin(kStep, 100 * kUs).Access(At(at.optimizer_state()), kBlockSize, false);
      p.Access(At(0), e_bytes, true).Access(At(at.d()), kBlockSize, true);
      p.Access(At(at.f()), kBlockSize, true).End(kStep);
    }
    p.Deactivate(act, kBlockSize).Deactivate(grad, kBlockSize);
  }
  return p;
}

// Kernel begins and ends, and the moves the engine made, with their times.
class Recorder final : public EngineObserver {
 public:
  struct Move {
    TransferKind kind;
    BlockNumber block;
    uint64_t bytes;
    Nanos issued;
    Nanos done = -1;
  };
  void OnKernelBegin(uint32_t exec_id, Nanos now) override { begins[exec_id].push_back(now); }
  void OnKernelEnd(uint32_t exec_id, Nanos now) override { ends[exec_id].push_back(now); }
  void OnTransferIssued(const Transfer& t, Nanos now) override {
    index_[t.id] = moves.size();
    moves.push_back(Move{t.kind, t.block, t.copy_bytes(), now});
  }
  void OnTransferCompleted(const Transfer& t, Nanos now) override {
    moves[index_.at(t.id)].done = now;
  }
  std::vector<Move> Of(int block) const {
    std::vector<Move> out;
    for (const Move& move : moves) {
      if (move.block == Block(block)) out.push_back(move);
    }
    return out;
  }

  std::map<uint32_t, std::vector<Nanos>> begins, ends;
  std::vector<Move> moves;

 private:
  std::map<TransferId, size_t> index_;
};

std::unique_ptr<Policy> MakeMemferry(const std::string& params = "") {
  return MakePolicy(params.empty() ? "memferry" : "memferry:" + params);
}

uint64_t ParameterPeak(const RunStats& stats) {
  return stats.peak_device_bytes_by_role[static_cast<size_t>(TensorRole::kParameter)];
}

// --- Reading the program ---

TEST(MemferryLayerTableTest, LayersPassesAndTimesOfAHandBuiltIteration) {
  const ProgramGraph graph = Graph(ThreeLayers(1));
  ASSERT_EQ(graph.iterations.size(), 1u);
  const DeviceConfig device = SlowRemoteDevice();
  absl::StatusOr<ProgramLayers> layers =
      BuildLayerTable(graph.iterations[0], graph.kernel_names, device);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(layers->backward_begin, 3u);  // the loss's seed writes the first gradient
  EXPECT_EQ(layers->step_begin, 7u);      // no optimizer: the iteration's end
  EXPECT_FALSE(layers->optimizer_on_device);
  const LayerTable& table = layers->table;
  ASSERT_EQ(table.layers.size(), 3u);
  EXPECT_EQ(table.layers[0].name, "e");
  EXPECT_EQ(table.layers[1].name, "d");
  EXPECT_EQ(table.layers[2].name, "f");
  for (const LayerCosts& c : table.layers) {
    EXPECT_EQ(c.parameter_bytes, kBlockSize);
    EXPECT_EQ(c.transfer, kBlockCopy);  // one block, no latency on the test link
  }
  // e's forward: 2 page visits, so 2 issuers and a 10 us step; its one
  // remote page holds an issuer for 4096 B at 0.25 GB/s plus the 1 us round
  // trip, 17.384 us, while the other computes.
  EXPECT_EQ(table.layers[0].forward, 10 * kUs);
  EXPECT_EQ(table.layers[0].forward_from_host, 17384);
  // e's backward reads its whole table: 2 MiB at 0.25 GB/s and the round
  // trip, in place of 512 of the kernel's 514 visits (129 rounds of 4).
  EXPECT_EQ(table.layers[0].backward, 100 * kUs);
  EXPECT_NEAR(table.layers[0].backward_from_host,
              100 * kUs + 4 * kBlockCopy + 1000 - 512.0 * (100e3 / 129) / 4, 1);
  // f's backward is claimed by name and reads no weight.
  EXPECT_EQ(table.layers[2].backward, 10 * kUs);
  EXPECT_EQ(table.layers[2].backward_from_host, 10 * kUs);
  // The loss's seed runs before f's backward.
  EXPECT_EQ(table.layers[2].backward_after, 10 * kUs);
  EXPECT_EQ(layers->layers[0].forward_end, 0u);
  EXPECT_EQ(layers->layers[0].first_backward, 6u);
  EXPECT_EQ(layers->layers[2].first_backward, 4u);
}

TEST(MemferryLayerTableTest, AProgramWithoutRolesIsRefused) {
  ProgramBuilder p;
  p.Alloc(0, 1).Activate(At(0), kBlockSize).Iteration(0).Kernel(1, 10 * kUs, {0});
  std::unique_ptr<Policy> policy = MakeMemferry();
  const SimRun run = RunOnSim(p, 4, *policy, SlowRemoteDevice());
  EXPECT_TRUE(IsPolicyRefusal(run.status)) << run.status;
}

// The remote estimate is the sim's model: one kernel reading a block
// through a mapping, timed on the sim, in the regimes where the link, the
// issuers' round trips or the compute bound it.
struct RemoteCase {
  const char* what;
  Nanos compute;
  int remote_pages;    // pages of block 0 read, one access each, mapped remotely
  uint64_t bytes_per_access;
  int local_pages;     // pages of block 1 read on the device
  Nanos round_trip;
};

TEST(MemferryLayerTableTest, TheRemoteEstimateMatchesTheSim) {
  for (const RemoteCase& c : {RemoteCase{"link-bound", 10 * kUs, 512, kPageSize, 0, 1000},
                              RemoteCase{"link-bound, then compute", 5 * kMs, 512, kPageSize,
                                         512, 1000},
                              RemoteCase{"round-trip-bound", 100 * kUs, 64, 64, 64, 20 * kUs},
                              RemoteCase{"two remote pages among many", 1 * kMs, 2, kPageSize,
                                         510, 1000},
                              RemoteCase{"compute-bound", 20 * kMs, 256, kPageSize, 256, 1000}}) {
    SCOPED_TRACE(c.what);
    DeviceConfig device = SlowRemoteDevice();
    device.link.remote_latency_ns = c.round_trip;
    ProgramBuilder p;
    p.Alloc(0, 2).Activate(At(0), kBlockSize, ActivateCause(TensorRole::kParameter));
    p.Activate(At(1), kBlockSize, ActivateCause(TensorRole::kActivation)).Iteration(0);
    // Block 1 is made resident by a first kernel, untimed.
    p.Kernel(1, 0, {1}, /*write=*/true);
    p.Begin(2, c.compute);
    for (int i = 0; i < c.remote_pages; ++i) {
      p.Access(At(0) + static_cast<uint64_t>(i) * kPageSize, c.bytes_per_access, false);
    }
    for (int i = 0; i < c.local_pages; ++i) {
      p.Access(At(1) + static_cast<uint64_t>(i) * kPageSize, kPageSize, false);
    }
    p.End(2);
    const ProgramGraph graph = Graph(p);
    const Nanos estimate =
        KernelTimeWithRemote(graph.iterations[0].kernels[1], {0}, device);

    ScriptedMoves policy;
    policy.At(1, [](PolicyContext& context) { context.MapRemote(Block(0), FullPageMask()); });
    Recorder recorder;
    const SimRun run = RunOnSim(p, 4, policy, device, ReplayPolicy::kBatch, SimOptions{},
                                &recorder);
    ASSERT_TRUE(run.status.ok()) << run.status;
    const Nanos measured = recorder.ends[2][0] - recorder.begins[2][0];
    EXPECT_NEAR(static_cast<double>(estimate), static_cast<double>(measured),
                0.01 * static_cast<double>(measured));
    EXPECT_GE(estimate, c.compute);
  }
}

// --- Carrying out a plan ---

TEST(MemferryPolicyTest, ThePlanGivesEachLayerTheModeItsTimesCallFor) {
  // e's forward gathers a page: DHA. d reads its whole weight at a quarter
  // of the copy rate: GFGB. e's backward reads its whole table, and its
  // copy fits between d's load and that backward: DFGB. f's backward reads
  // nothing of it: DHA.
  std::unique_ptr<Policy> policy = MakeMemferry();
  const SimRun run = RunOnSim(ThreeLayers(1), 8, *policy, SlowRemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  const MemferryPlan& plan = AsMemferry(*policy).plan();
  EXPECT_THAT(plan.modes, ::testing::ElementsAre(ExecutionMode::kDfgb, ExecutionMode::kGfgb,
                                                 ExecutionMode::kDha));
  EXPECT_EQ(plan.times.late_copies, 0);
  EXPECT_EQ(plan.parameter_bytes(), 2 * kBlockSize);
}

TEST(MemferryPolicyTest, EachModeMovesItsParametersAsPlanned) {
  std::unique_ptr<Policy> policy = MakeMemferry();
  Recorder recorder;
  const SimRun run = RunOnSim(ThreeLayers(2), 8, *policy, SlowRemoteDevice(),
                              ReplayPolicy::kBatch, SimOptions{}, &recorder);
  ASSERT_TRUE(run.status.ok()) << run.status;

  // f (DHA): never migrated; its forward's page is read over the link.
  EXPECT_TRUE(recorder.Of(2).empty());
  // d (GFGB): prefetched when the first iteration begins, before its
  // forward, and kept: no other move, no fault.
  const std::vector<Recorder::Move> d = recorder.Of(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].kind, TransferKind::kPrefetch);
  EXPECT_EQ(d[0].issued, 0);
  EXPECT_LE(d[0].done, recorder.begins[kDForward][0]);
  // e (DFGB): per iteration, a copy issued as its forward ends, landed
  // before its backward begins, and a release after its backward that
  // writes nothing back.
  const std::vector<Recorder::Move> e = recorder.Of(0);
  ASSERT_EQ(e.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    const Recorder::Move& copy = e[static_cast<size_t>(2 * i)];
    const Recorder::Move& release = e[static_cast<size_t>(2 * i + 1)];
    EXPECT_EQ(copy.kind, TransferKind::kPrefetch);
    EXPECT_EQ(copy.bytes, kBlockSize);
    EXPECT_EQ(copy.issued, recorder.ends[kEForward][static_cast<size_t>(i)]);
    EXPECT_LE(copy.done, recorder.begins[kEBackward][static_cast<size_t>(i)]);
    EXPECT_EQ(release.kind, TransferKind::kEviction);
    EXPECT_EQ(release.bytes, 0u);
    EXPECT_EQ(release.issued, recorder.ends[kEBackward][static_cast<size_t>(i)]);
  }
  // The only bytes copied in are e's, twice; nothing was written back; the
  // remote reads are e's and f's gathered pages, two iterations.
  EXPECT_EQ(run.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, 0u);
  EXPECT_EQ(run.stats.remote_read_bytes, 2 * 2 * kPageSize);
  EXPECT_EQ(run.stats.remote_write_bytes, 0u);
  // Parameters on the device at most: d's and e's, as planned.
  EXPECT_EQ(ParameterPeak(run.stats), AsMemferry(*policy).plan().parameter_bytes());

  std::map<std::string, PolicyStats::Value> by_name = StatsOf(*policy);
  EXPECT_EQ(std::get<uint64_t>(by_name["layers_dfgb"]), 1u);
  EXPECT_EQ(std::get<uint64_t>(by_name["parameter_bytes_gfgb"]), kBlockSize);
  EXPECT_EQ(std::get<uint64_t>(by_name["planned_iterations_run"]), 2u);
  EXPECT_EQ(std::get<uint64_t>(by_name["dfgb_copies_late"]), 0u);
  EXPECT_EQ(std::get<uint64_t>(by_name["kernels_off_plan"]), 0u);
}

// Plans on ThreeLayers, where e's copy has d's 5 ms forward and backward to
// land in, then runs `iterations` of one where d and the loss compute for
// 10 us and f's
// forward reads no weight (its remote page would wait behind the copy on the
// link, as the sim's remote accesses share the lanes with migrations): e's
// backward begins before its copy is done.
struct LateRun {
  absl::Status status;
  RunStats stats;
  std::map<std::string, PolicyStats::Value> policy;
  Recorder recorder;
  std::map<int, PageMask> resident_at_end;  // by block
};

LateRun RunWithLateCopy(int iterations, const Layout& at) {
  const DeviceConfig device = SlowRemoteDevice();
  const ProgramBuilder planned = ThreeLayers(iterations, false, at);
  std::unique_ptr<Policy> policy = MakeMemferry();
  LateRun run;
  VectorSource plan_source = planned.Source();
  run.status = PlanAhead(*policy, plan_source, device, 16 * kBlockSize);
  if (!run.status.ok()) return run;
  EXPECT_EQ(AsMemferry(*policy).plan().modes[0], ExecutionMode::kDfgb);
  if (at.with_g) {
    EXPECT_EQ(AsMemferry(*policy).plan().modes.back(), ExecutionMode::kDfgb);
  }
  ProgramBuilder faster;
  for (Event event : planned.events()) {
    if (event.kind == EventKind::kKernelBegin &&
        (event.exec_id == kDForward || event.exec_id == kDBackward ||
         event.exec_id == kLossSeed)) {
      event.duration_ns = 10 * kUs;
    }
    if (event.kind == EventKind::kAccess && event.address == At(at.f())) continue;
    faster.Raw(event);
  }
  SimBackend backend(device, 16, SimOptions{});
  EngineConfig config = EngineConfigFor(device);
  config.check_invariants = true;
  Engine engine(backend, *policy, 16, config);
  engine.AddObserver(&run.recorder);
  VectorSource source = faster.Source();
  run.status = backend.Run(source, engine, nullptr);
  if (run.status.ok()) run.status = engine.CheckInvariants();
  run.stats = engine.stats();
  run.policy = StatsOf(*policy);
  for (int block = 0; block <= at.g(); ++block) {
    if (const BlockState* state = engine.memory_state().Find(Block(block)); state != nullptr) {
      run.resident_at_end[block] = state->resident;
    }
  }
  return run;
}

TEST(MemferryPolicyTest, ACopyThatLandsAfterItsBackwardBeginsIsCountedLate) {
  const LateRun run = RunWithLateCopy(1, Layout());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(std::get<uint64_t>(run.policy.at("dfgb_copies_late")), 1u);
  EXPECT_GT(std::get<uint64_t>(run.policy.at("dfgb_late_bytes")), 0u);
}

TEST(MemferryPolicyTest, AReleasedLayerStaysReleasedWhereverItsCopyWas) {
  // e and g are both DFGB (d computes 20 ms and the loss 10 ms, so the plan
  // has room for their copies). e's copy takes the engine's 4 prefetch
  // slots and queues the rest of its blocks, and g's copy queues behind
  // them. g's backward comes first and reads its page through the mapping,
  // which stays until the copy is issued, so g is released with its copy
  // still queued (e of 8 blocks) or just issued (e of 6: a slot freed as g's
  // backward ended). Either way g must not come back: a queued copy issued
  // later, or one that lands after the release, would leave it on the
  // device for nothing.
  for (const int e_blocks : {8, 6}) {
    SCOPED_TRACE(e_blocks);
    const Layout at{e_blocks, 20 * kMs, /*with_g=*/true, 10 * kMs};
    const LateRun run = RunWithLateCopy(2, at);
    ASSERT_TRUE(run.status.ok()) << run.status;
    const std::vector<Nanos>& released = run.recorder.ends.at(kGBackward);
    ASSERT_EQ(released.size(), 2u);
    const std::vector<Recorder::Move> g = run.recorder.Of(at.g());
    for (const Recorder::Move& move : g) {
      if (move.kind == TransferKind::kEviction) continue;
      const size_t i = move.issued <= released[0] ? 0 : 1;
      EXPECT_LE(move.issued, released[i]) << "g copied in after its release";
      if (move.done > released[i]) {
        // Landed after the release: sent back as it lands.
        EXPECT_TRUE(std::any_of(g.begin(), g.end(), [&](const Recorder::Move& out) {
          return out.kind == TransferKind::kEviction && out.issued == move.done;
        })) << "g's copy landed at " << move.done << " and stayed";
      }
    }
    EXPECT_TRUE(run.resident_at_end.at(at.g()).none());
    EXPECT_EQ(run.stats.d2h_bytes, 0u);
  }
}

TEST(MemferryPolicyTest, AllDhaMigratesNoParameter) {
  std::unique_ptr<Policy> policy = MakeMemferry("modes=dha");
  Recorder recorder;
  const SimRun run = RunOnSim(ThreeLayers(2), 8, *policy, SlowRemoteDevice(),
                              ReplayPolicy::kBatch, SimOptions{}, &recorder);
  ASSERT_TRUE(run.status.ok()) << run.status;
  for (int block = 0; block < 3; ++block) EXPECT_TRUE(recorder.Of(block).empty()) << block;
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(ParameterPeak(run.stats), 0u);
  // Per iteration: a page each of e and f forward, d's weight twice, e's in
  // its backward.
  EXPECT_EQ(run.stats.remote_read_bytes, 2 * (2 * kPageSize + 3 * kBlockSize));
}

TEST(MemferryPolicyTest, TheBudgetSendsTheCheapestBytesToTheHost) {
  // A tenth of 8 frames is less than d's weight: d goes DHA, and e's copy
  // would not fit either.
  std::unique_ptr<Policy> policy = MakeMemferry("parameter_share=0.1");
  const SimRun run = RunOnSim(ThreeLayers(2), 8, *policy, SlowRemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_THAT(AsMemferry(*policy).plan().modes, ::testing::Each(ExecutionMode::kDha));
  EXPECT_EQ(ParameterPeak(run.stats), 0u);
}

TEST(MemferryPolicyTest, AStepOnTheDeviceUpdatesRemoteParametersThroughTheirMappings) {
  // The step reads the optimizer state and writes every weight: d on the
  // device, e (released after its backward) and f through their mappings.
  std::unique_ptr<Policy> policy = MakeMemferry();
  Recorder recorder;
  const SimRun run = RunOnSim(ThreeLayers(2, /*optimizer_step=*/true), 8, *policy,
                              SlowRemoteDevice(), ReplayPolicy::kBatch, SimOptions{}, &recorder);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_TRUE(AsMemferry(*policy).layers().optimizer_on_device);
  EXPECT_EQ(AsMemferry(*policy).layers().step_begin, 7u);
  EXPECT_TRUE(recorder.Of(2).empty());
  EXPECT_EQ(run.stats.remote_write_bytes, 2 * 2 * kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, 0u);  // e was clean when released
}

// --- The zoo, through the command line ---

TEST(MemferryCliTest, RunsGpt2SmallEndToEnd) {
  const Outcome outcome =
      Umlab({"run", "--workload=gpt2-small", "--workload-arg=batch=1,iterations=2",
             "--policy=memferry", "--backend=sim", "--capacity=1.0", "--format=json"});
  ASSERT_EQ(outcome.code, 0) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr("\"layers_dha\":"));
  EXPECT_THAT(outcome.out, HasSubstr("\"optimizer_on_device\":1"));
  EXPECT_THAT(outcome.out, HasSubstr("\"kernels_off_plan\":0"));
}

TEST(MemferryPolicyTest, WithTheStepOnTheHostTheGradientLeavesDuringTheBackward) {
  // The offloaded step in miniature (tests/offload_program.h): memferry
  // writes the gradient back as soon as the backward is done with it,
  // behind kernel 3, so the CPU's step does not wait for it.
  std::unique_ptr<Policy> policy = MakeMemferry();
  const SimRun run = RunOnSim(OffloadedStep(), 4, *policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.pre_evictions, 1u);
  EXPECT_EQ(run.stats.host_writeback_bytes, 0u);
  EXPECT_EQ(run.stats.host_wait_ns, 0);
  EXPECT_EQ(StatsOf(*policy).at("gradients_written_back"), PolicyStats::Value(uint64_t{1}));
}

}  // namespace
}  // namespace umlab::testing
