// G10's planner (policies/g10): the vitality analysis, the link budget and
// the plan on hand-built graphs whose right answers are worked out in the
// comments, then the policy end to end on the sim.
#include <algorithm>

#include <gtest/gtest.h>

#include "policies/demand/demand.h"
#include "policies/g10/g10.h"
#include "policies/g10/g10_deepum.h"
#include "policies/g10/flashneuron.h"
#include "policies/g10/g10_planner.h"
#include "policies/g10/link_budget.h"
#include "policies/g10/tensor_vitality.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr uint64_t kBlock = kBlockSize;

GraphKernel K(std::vector<uint32_t> reads, std::vector<uint32_t> writes, Nanos ns) {
  return GraphKernel{1, ns, std::move(reads), std::move(writes), {}};
}

// Eight kernels of 1..8 us. W (0) is a weight read by kernels 0 and 5; A (1)
// is written by 0 and read by 1 and 6; B (2) is written by 2 and never read;
// U (3) is never used.
IterationGraph EightKernels() {
  IterationGraph g;
  g.tensors = {{0x1000000, 3 * 4096, true, std::nullopt},
               {0x2000000, 4096, false, std::nullopt},
               {0x3000000, 100, false, std::nullopt},
               {0x4000000, 4096, false, std::nullopt}};
  g.kernels = {K({0}, {1}, 1000), K({1}, {}, 2000), K({}, {2}, 3000), K({}, {}, 4000),
               K({}, {}, 5000), K({0}, {}, 6000), K({1}, {}, 7000), K({}, {}, 8000)};
  return g;
}

TEST(TensorVitalityTest, LivesAndInactivePeriods) {
  const TensorVitality v(EightKernels());
  ASSERT_EQ(v.kernels(), 8);
  const std::vector<TensorLife>& t = v.tensors();
  EXPECT_EQ(t[0].bytes, 3 * 4096u);
  EXPECT_EQ(t[2].bytes, 4096u);  // 100 bytes take a page
  EXPECT_EQ(t[1].birth, 0);
  EXPECT_EQ(t[1].death, 7);      // last read at 6
  EXPECT_EQ(t[2].birth, 2);
  EXPECT_EQ(t[2].death, -1);     // never read
  EXPECT_FALSE(t[3].used);
  // W: between its uses [1, 5), then from after its last use round to its
  // first, [6, 0), looped. A: [2, 6). B and U: none.
  const std::vector<InactivePeriod>& p = v.periods();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].tensor, 0u);
  EXPECT_EQ(p[0].start, 1);
  EXPECT_EQ(p[0].end, 5);
  EXPECT_FALSE(p[0].looped);
  EXPECT_DOUBLE_EQ(p[0].time_us, 2 + 3 + 4 + 5);
  EXPECT_EQ(p[1].start, 6);
  EXPECT_EQ(p[1].end, 0);
  EXPECT_TRUE(p[1].looped);
  EXPECT_DOUBLE_EQ(p[1].time_us, 7 + 8);
  EXPECT_EQ(p[2].tensor, 1u);
  EXPECT_EQ(p[2].start, 2);
  EXPECT_EQ(p[2].end, 6);
  EXPECT_DOUBLE_EQ(p[2].time_us, 3 + 4 + 5 + 6);
}

TEST(TensorVitalityTest, TheScheduleRepeatsPastTheIterationsEnd) {
  const TensorVitality v(EightKernels());
  EXPECT_DOUBLE_EQ(v.StartUs(8), 36);
  EXPECT_DOUBLE_EQ(v.StartUs(10), 39);
  EXPECT_EQ(v.KernelAt(3.5, 0, 8), 2);   // kernel 2 runs over [3, 6)
  EXPECT_EQ(v.KernelAt(40, 0, 16), 10);  // kernel 2 of the next iteration
  EXPECT_EQ(v.KernelAt(3.5, 3, 8), -1);  // not in the range asked
  EXPECT_TRUE(v.Uses(5, 0));
  EXPECT_TRUE(v.Uses(13, 0));  // 13 is kernel 5 again
  EXPECT_FALSE(v.Uses(4, 0));
}

TEST(LinkBudgetTest, EvictionsFinishAndPrefetchesStartByTheKernelsCapacity) {
  const TensorVitality v(EightKernels());
  // 1000 bytes per microsecond on the link: kernel k carries 1000 x (k+1).
  LinkBudget budget(v, LaneRates{1000, 1000, 250, 125});
  EXPECT_EQ(budget.FinishKernel(Lane::kDeviceToHost, 2500, 0), 1);   // 1000 + 2000
  EXPECT_EQ(budget.StartKernel(Lane::kHostToDevice, 2500, 3), 2);    // kernel 2: 3000
  EXPECT_EQ(budget.StartKernel(Lane::kHostToDevice, 5500, 3), 0);    // 3000 + 2000 + 1000
  EXPECT_EQ(budget.StartKernel(Lane::kHostToDevice, 9000, 3), 0);    // not time enough
  EXPECT_EQ(budget.StartKernel(Lane::kHostToDevice, 1, 0), -1);
  EXPECT_EQ(budget.FinishKernel(Lane::kDeviceToHost, 1e9, 0), 7);    // never: the last
}

TEST(LinkBudgetTest, StorageTrafficCrossesTheLinkAndAFullLinkFillsTheDrive) {
  const TensorVitality v(EightKernels());
  LinkBudget budget(v, LaneRates{1000, 1000, 250, 125});
  // 300 bytes to the drive: 125 in kernel 0 (now full), 175 in kernel 1.
  budget.Book(Lane::kDeviceToStorage, 300, 0);
  EXPECT_FALSE(budget.AnyRoom(Lane::kDeviceToStorage, 0, 1));
  EXPECT_TRUE(budget.AnyRoom(Lane::kDeviceToStorage, 0, 2));
  EXPECT_EQ(budget.FinishKernel(Lane::kDeviceToStorage, 75, 0), 1);  // 250 - 175 left
  // ...and they took the link's room too: 875 of kernel 0's 1000 remain,
  // 1825 of kernel 1's 2000.
  EXPECT_EQ(budget.FinishKernel(Lane::kDeviceToHost, 875 + 1825, 0), 1);
  EXPECT_EQ(budget.FinishKernel(Lane::kDeviceToHost, 875 + 1826, 0), 2);
  // Filling the link inbound leaves nothing for the drive.
  budget.Book(Lane::kHostToDevice, 1000, 0);
  EXPECT_FALSE(budget.AnyRoom(Lane::kStorageToDevice, 0, 1));
}

// Ten kernels of 1 ms on a 1 GB/s link (1000 bytes per microsecond) with no
// fault latency. W, one block, is read by kernels 0 and 9; X, eight
// blocks, by kernels 1 to 8. 9 blocks do not fit the 8-block device.
IterationGraph WeightIdleInTheMiddle() {
  IterationGraph g;
  g.tensors = {{ProgramBuilder::BlockAddress(0), kBlock, true, std::nullopt},
               {ProgramBuilder::BlockAddress(1), 8 * kBlock, true, std::nullopt}};
  g.kernels.push_back(K({0}, {}, 1000000));
  for (int k = 1; k <= 8; ++k) g.kernels.push_back(K({1}, {}, 1000000));
  g.kernels.push_back(K({0}, {}, 1000000));
  return g;
}

std::vector<std::pair<int, Movement>> Movements(const G10Plan& plan) {
  std::vector<std::pair<int, Movement>> all;
  for (size_t k = 0; k < plan.at_kernel.size(); ++k) {
    for (const Movement& m : plan.at_kernel[k]) all.emplace_back(static_cast<int>(k), m);
  }
  return all;
}

TEST(G10PlannerTest, AWeightIdleLongEnoughGoesToTheHostAndComesBackInTime) {
  const G10Plan plan = PlanIteration(WeightIdleInTheMiddle(), TestDevice(), 8 * kBlock, {});
  // W's round trip to the host: 2097 us each way plus half of one as
  // margin, 5243 us, fits its 8 ms period [1, 9). Leaving at kernel 1, it
  // is gone in kernel 3 (a kernel carries 1000000 of its 2097152 bytes);
  // coming back it must start in kernel 6 to land by kernel 9. The eager
  // pass cannot move the prefetch earlier: kernel 5 is over the line
  // without W (16 MiB against 99% of 16).
  const auto moves = Movements(plan);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].first, 1);
  EXPECT_EQ(moves[0].second.kind, MovementKind::kPreEvict);
  EXPECT_EQ(moves[0].second.tensor, 0u);
  EXPECT_EQ(moves[0].second.tier, MemoryTier::kHost);
  EXPECT_EQ(moves[1].first, 6);
  EXPECT_EQ(moves[1].second.kind, MovementKind::kPrefetch);
  EXPECT_EQ(plan.evictions_to_host, 1u);
  EXPECT_DOUBLE_EQ(plan.peak_estimate_bytes, 9.0 * kBlock);
  // X cannot leave (its only period, 9 to 1, is 2 ms), so the peak stays.
  EXPECT_DOUBLE_EQ(plan.planned_peak_bytes, 9.0 * kBlock);
}

TEST(G10PlannerTest, StorageTakesWhatItCanMoveInTimeAndTheHostTheRest) {
  DeviceConfig device = TestDevice();
  device.host_memory_bytes = 1ull << 30;
  // A drive as fast as the link: W's round trip through it is 10.5 ms, too
  // long for the period, so W goes to the host.
  device.link.storage = StorageConfig{true, 0.5e9, 0.5e9, 0, 0};
  G10Plan plan = PlanIteration(WeightIdleInTheMiddle(), device, 8 * kBlock, {});
  EXPECT_EQ(plan.evictions_to_host, 1u);
  EXPECT_EQ(plan.evictions_to_storage, 0u);
  // A drive twice the link's speed: 2.6 ms with the margin; W goes there,
  // is gone in kernel 2 and starts back in kernel 7 (the budget counts the
  // drive's rate).
  device.link.storage = StorageConfig{true, 2e9, 2e9, 0, 0};
  plan = PlanIteration(WeightIdleInTheMiddle(), device, 8 * kBlock, {});
  EXPECT_EQ(plan.evictions_to_storage, 1u);
  const auto moves = Movements(plan);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].second.tier, MemoryTier::kStorage);
  EXPECT_EQ(moves[1].first, 7);
  // Without room on the host, a period only the host could hide stays put.
  device.link.storage = StorageConfig{true, 0.5e9, 0.5e9, 0, 0};
  device.host_memory_bytes = kBlock / 2;
  plan = PlanIteration(WeightIdleInTheMiddle(), device, 8 * kBlock, {});
  EXPECT_TRUE(Movements(plan).empty());
}

TEST(G10PlannerTest, IntermediatesLiveFromJustBeforeBirthToDeathUntilTheEstimateFits) {
  // Two 1 ms kernels per intermediate, each written then read: T0 by 0-1,
  // T1 by 2-3, T2 by 4-5, four blocks each, on a 9-block device. All three
  // resident at once (12) are over the line; once T0 is confined to
  // kernels 0-1 the rest peaks at 8 everywhere but there... then T1.
  IterationGraph g;
  for (int t = 0; t < 3; ++t) {
    g.tensors.push_back({ProgramBuilder::BlockAddress(4 * t), 4 * kBlock, false, std::nullopt});
    g.kernels.push_back(K({}, {static_cast<uint32_t>(t)}, 1000000));
    g.kernels.push_back(K({static_cast<uint32_t>(t)}, {}, 1000000));
  }
  const G10Plan plan = PlanIteration(g, TestDevice(), 9 * kBlock, {});
  // T0: pre-allocated at kernel 0 (its birth), deallocated at 2. The
  // estimate is then 12 over kernels 0-1 and 8 after: still over. T1:
  // allocated at 1 (8 MiB cost 6.8 us before kernel 2 starts), deallocated
  // at 4: 8, 12, 12, 12... T2 likewise; then every kernel holds at most 8.
  EXPECT_EQ(plan.preallocations, 3u);
  EXPECT_EQ(plan.deallocations, 3u);
  const auto moves = Movements(plan);
  const auto has = [&](int kernel, MovementKind kind, uint32_t tensor) {
    return std::any_of(moves.begin(), moves.end(), [&](const auto& m) {
      return m.first == kernel && m.second.kind == kind && m.second.tensor == tensor;
    });
  };
  EXPECT_TRUE(has(0, MovementKind::kPreallocate, 0));
  EXPECT_TRUE(has(2, MovementKind::kDeallocate, 0));
  EXPECT_TRUE(has(1, MovementKind::kPreallocate, 1));
  EXPECT_TRUE(has(4, MovementKind::kDeallocate, 1));
  EXPECT_TRUE(has(3, MovementKind::kPreallocate, 2));
  EXPECT_TRUE(has(0, MovementKind::kDeallocate, 2));  // death at 6: the next iteration's 0
  EXPECT_LE(plan.planned_peak_bytes, 8.0 * kBlock);
}

}  // namespace
}  // namespace umlab::testing

namespace umlab::testing {
namespace {

// WeightIdleInTheMiddle as a program of three iterations, plus an
// intermediate T (block 9) written by kernel 2 and read by kernel 3.
ProgramBuilder WeightIdleProgram() {
  ProgramBuilder p;
  p.Alloc(0, 10).Activate(ProgramBuilder::BlockAddress(0), kBlock);
  p.Activate(ProgramBuilder::BlockAddress(1), 8 * kBlock);
  for (int i = 0; i < 3; ++i) {
    p.Iteration(i);
    p.Kernel(1, 1000000, {0});
    p.Kernel(2, 1000000, {1, 2, 3, 4, 5, 6, 7, 8});
    p.Activate(ProgramBuilder::BlockAddress(9), kBlock);
    p.Kernel(3, 1000000, {1, 2, 3, 4, 5, 6, 7, 8, 9}, /*write=*/true);
    p.Kernel(4, 1000000, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    p.Deactivate(ProgramBuilder::BlockAddress(9), kBlock);
    for (int k = 5; k <= 9; ++k) p.Kernel(k, 1000000, {1, 2, 3, 4, 5, 6, 7, 8});
    p.Kernel(10, 1000000, {0});
  }
  return p;
}

TEST(G10PolicyTest, CarriesItsPlanAndBeatsDemandPaging) {
  G10Policy g10({});
  const SimRun planned = RunOnSim(WeightIdleProgram(), 9, g10);
  ASSERT_TRUE(planned.status.ok()) << planned.status;
  DemandPolicy demand;
  const SimRun paged = RunOnSim(WeightIdleProgram(), 9, demand);
  ASSERT_TRUE(paged.status.ok()) << paged.status;
  PolicyStats stats;
  g10.ReportStats(stats);
  const auto count = [&](const std::string& name) {
    for (const PolicyStats::Counter& c : stats.counters()) {
      if (c.name == name) return std::get<uint64_t>(c.value);
    }
    ADD_FAILURE() << "no counter " << name;
    return uint64_t{0};
  };
  EXPECT_EQ(count("plans"), 1u);  // the three iterations are alike
  EXPECT_EQ(count("kernels_unplanned"), 0u);
  EXPECT_GE(planned.stats.pre_evictions, 3u);  // W, every iteration
  EXPECT_GT(planned.stats.prefetch_bytes, 0u);
  EXPECT_LT(planned.stats.faults, paged.stats.faults);
  EXPECT_LT(planned.stats.time_ns, paged.stats.time_ns);
  // T's pages are discarded at its death, not written back.
  EXPECT_GE(planned.stats.invalidated_bytes, 2 * kBlock);
}

TEST(G10PolicyTest, WithoutAPlanItMovesNothingAndSaysSo) {
  // A caller that skips PlanAhead (the uffd test harness takes a one-pass
  // source) gets demand paging, and the stats show why.
  G10Policy g10({});
  ASSERT_TRUE(g10.PlansAhead());
  const ProgramBuilder program = WeightIdleProgram();
  SimBackend backend(TestDevice(), 9);
  Engine engine(backend, g10, 9, EngineConfigFor(TestDevice()));
  VectorSource source = program.Source();
  ASSERT_TRUE(backend.Run(source, engine, nullptr).ok());
  EXPECT_EQ(engine.stats().pre_evictions, 0u);
  PolicyStats stats;
  g10.ReportStats(stats);
  bool found = false;
  for (const PolicyStats::Counter& c : stats.counters()) {
    if (c.name == "kernels_unplanned") {
      found = true;
      EXPECT_EQ(std::get<uint64_t>(c.value), 30u);
    }
  }
  EXPECT_TRUE(found);
}

// Six kernels in a ring, each writing its own block, three iterations;
// kernels last 10 ms, a block moves in 2.1 ms.
ProgramBuilder Ring() {
  ProgramBuilder p;
  p.Alloc(0, 6);
  for (int b = 0; b < 6; ++b) p.Activate(ProgramBuilder::BlockAddress(b), kBlock);
  for (int i = 0; i < 3; ++i) {
    p.Iteration(i);
    for (int b = 0; b < 6; ++b) p.Kernel(b + 1, 10000000, {b}, /*write=*/true);
  }
  return p;
}

TEST(G10DeepUmTest, TheOracleBringsEachKernelsTensorsAheadAndSparesTheWindow) {
  // Degree 2 on four frames: when kernel k starts, kernel k + 2's block
  // comes, evicting the oldest block outside kernels k and k + 1 (the one
  // kernel k - 2 used). Only kernels 0 and 1 of the first iteration fault.
  // (Evicting by migration age alone would take block 2, populated first,
  // just as kernel 2 needs it.)
  G10DeepUmPolicy policy(2);
  const SimRun run = RunOnSim(Ring(), 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faulted_pages, 2 * uint64_t{kPagesPerBlock});
  // Everything that came in came ahead of need, so no kernel waited.
  EXPECT_EQ(run.stats.h2d_bytes, run.stats.prefetch_bytes);
  EXPECT_EQ(run.stats.time_ns, 18 * 10000000);
  EXPECT_EQ(run.stats.zero_filled_bytes, 6 * kBlock);
  EXPECT_EQ(run.stats.prefetches_dropped, 0u);
  DemandPolicy demand;
  const SimRun paged = RunOnSim(Ring(), 4, demand);
  ASSERT_TRUE(paged.status.ok()) << paged.status;
  EXPECT_EQ(paged.stats.faulted_pages, 18 * uint64_t{kPagesPerBlock});
}

// A forward pass of three activations (two blocks each) and a backward pass
// that reads them in reverse, around a weight W (one block):
//   k0 W -> A1, k1 A1 -> A2, k2 A2 -> A3, k3 loss(A3), k4 A3, k5 A2, k6 A1 W.
IterationGraph ForwardBackward(uint32_t loss_exec_id) {
  IterationGraph g;
  g.tensors = {{ProgramBuilder::BlockAddress(0), kBlock, true, std::nullopt},
               {ProgramBuilder::BlockAddress(1), 2 * kBlock, false, std::nullopt},
               {ProgramBuilder::BlockAddress(3), 2 * kBlock, false, std::nullopt},
               {ProgramBuilder::BlockAddress(5), 2 * kBlock, false, std::nullopt}};
  g.kernels = {K({0}, {1}, 1000000), K({1}, {2}, 1000000), K({2}, {3}, 1000000),
               K({3}, {}, 1000000),  K({3}, {}, 1000000), K({2}, {}, 1000000),
               K({0, 1}, {}, 1000000)};
  g.kernels[3].exec_id = loss_exec_id;
  return g;
}

TEST(FlashNeuronTest, OffloadsActivationsInForwardOrderUntilTheRestFit) {
  const absl::flat_hash_map<uint32_t, std::string> names = {{7, "nll_loss_forward"}};
  // Room for activations on 8 blocks: 8 - W - the largest working set (k1
  // and k2: 4 blocks) = 3. A1, A2 and A3 (6 blocks) live past the loss;
  // A1 leaves at the start of its idle period [2, 6), then A2 at that of
  // [3, 5); the 2 blocks of A3 then fit.
  absl::StatusOr<FlashNeuronPlan> plan = PlanFlashNeuron(ForwardBackward(7), names, 8 * kBlock);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->backward_from, 3);
  EXPECT_EQ(plan->working_set_bytes, 4 * kBlock);
  EXPECT_EQ(plan->offload_at[2], std::vector<uint32_t>({1}));
  EXPECT_EQ(plan->offload_at[3], std::vector<uint32_t>({2}));
  EXPECT_EQ(plan->offloaded_bytes, 4 * kBlock);
  // Without a loss kernel the backward pass starts after the peak of live
  // activations (kernel 2's end): the same plan.
  absl::StatusOr<FlashNeuronPlan> unnamed = PlanFlashNeuron(ForwardBackward(1), {}, 8 * kBlock);
  ASSERT_TRUE(unnamed.ok());
  EXPECT_EQ(unnamed->backward_from, 3);
  EXPECT_EQ(unnamed->offload_at, plan->offload_at);
}

TEST(FlashNeuronTest, AModelThatCannotFitFailsInOneLine) {
  const absl::flat_hash_map<uint32_t, std::string> names = {{7, "makeLoss"}};
  // 5 blocks: nothing left beside W and the working set.
  absl::StatusOr<FlashNeuronPlan> plan = PlanFlashNeuron(ForwardBackward(7), names, 5 * kBlock);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(IsPolicyRefusal(plan.status()));
  EXPECT_NE(plan.status().message().find("leave no room"), std::string::npos);
  // 6 blocks: one for activations, but A3 is never idle and takes two.
  plan = PlanFlashNeuron(ForwardBackward(7), names, 6 * kBlock);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("must stay"), std::string::npos);
  EXPECT_EQ(plan.status().message().find('\n'), std::string::npos);
}

// ForwardBackward as a program of three iterations, the loss kernel named.
ProgramBuilder ForwardBackwardProgram() {
  const IterationGraph graph = ForwardBackward(7);
  std::vector<Event> events;
  Event define;
  define.kind = EventKind::kKernelDefine;
  define.exec_id = 7;
  define.name = "makeLoss";
  ProgramBuilder p;
  p.Alloc(0, 7).Activate(ProgramBuilder::BlockAddress(0), kBlock);
  for (int i = 0; i < 3; ++i) {
    p.Iteration(i);
    for (size_t k = 0; k < graph.kernels.size(); ++k) {
      const GraphKernel& kernel = graph.kernels[k];
      if (k < 3) p.Activate(graph.tensors[k + 1].address, graph.tensors[k + 1].size);
      p.Begin(kernel.exec_id, kernel.duration_ns);
      for (uint32_t t : kernel.reads) p.Access(graph.tensors[t].address, graph.tensors[t].size, false);
      for (uint32_t t : kernel.writes) p.Access(graph.tensors[t].address, graph.tensors[t].size, true);
      p.End(kernel.exec_id);
      // Each activation dies after its last backward read.
      if (k >= 4) p.Deactivate(graph.tensors[7 - k].address, graph.tensors[7 - k].size);
    }
  }
  std::vector<Event> all = p.events();
  all.insert(all.begin(), define);
  ProgramBuilder named;
  for (const Event& e : all) named.Raw(e);
  return named;
}

TEST(FlashNeuronTest, OffloadsToStorageAndBringsBackBeforeTheBackwardPassNeedsIt) {
  DeviceConfig device = TestDevice();
  device.link.storage = StorageConfig{true, 1e9, 1e9, 0, 0};
  device.host_memory_bytes = 1ull << 30;
  FlashNeuronPolicy policy;
  // On 10 blocks activations have 5: A1 goes (A2 and A3 then fit). It
  // leaves for storage when kernel 2 starts. In the backward pass, after
  // kernel 5 (A3 freed), 7 blocks are free, 3 more than the largest
  // working set: A1 comes back for kernel 6. Every iteration alike.
  const SimRun run = RunOnSim(ForwardBackwardProgram(), 10, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.storage_write_bytes, 3 * 2 * kBlock);
  EXPECT_EQ(run.stats.storage_read_bytes, 3 * 2 * kBlock);
  EXPECT_EQ(run.stats.prefetch_bytes, 3 * 2 * kBlock);
  EXPECT_EQ(run.stats.fault_migrated_bytes, 0u);
}

}  // namespace
}  // namespace umlab::testing
