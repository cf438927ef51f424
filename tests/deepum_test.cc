// DeepUM's mechanisms, each on an input small enough to work out by hand:
// the correlation tables on their own, the policy's decisions through a fake
// engine context, and the whole policy on the sim backend.
#include "policies/deepum/deepum.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/memory_state.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<BlockNumber> Successors(const BlockTable& table, BlockNumber block) {
  const absl::Span<const BlockNumber> span = table.Successors(block);
  return std::vector<BlockNumber>(span.begin(), span.end());
}

// --- The UM-block correlation table ---------------------------------------

TEST(BlockTableTest, KeepsSuccessorsInMostRecentlyUsedOrder) {
  BlockTable table(/*rows=*/16, /*assoc=*/2, /*succs=*/4);
  EXPECT_THAT(Successors(table, 1), IsEmpty());
  table.Insert(1, 2);
  table.Insert(1, 3);
  table.Insert(1, 4);
  EXPECT_THAT(Successors(table, 1), ElementsAre(4, 3, 2));
  // A successor seen again moves to the front without a duplicate.
  table.Insert(1, 2);
  EXPECT_THAT(Successors(table, 1), ElementsAre(2, 4, 3));
  // A full list drops its least recent successor (3).
  table.Insert(1, 5);
  table.Insert(1, 6);
  EXPECT_THAT(Successors(table, 1), ElementsAre(6, 5, 2, 4));
  // A block never follows itself.
  table.Insert(1, 1);
  EXPECT_THAT(Successors(table, 1), ElementsAre(6, 5, 2, 4));
}

TEST(BlockTableTest, RowConflictsEvictTheLeastRecentlyUpdatedWay) {
  // Four rows: blocks 1, 5, 9 and 13 all map to row 1, which has two ways.
  BlockTable table(/*rows=*/4, /*assoc=*/2, /*succs=*/2);
  ASSERT_EQ(table.RowOf(1), table.RowOf(5));
  ASSERT_EQ(table.RowOf(1), table.RowOf(9));
  table.Insert(1, 100);
  table.Insert(5, 200);
  EXPECT_THAT(Successors(table, 1), ElementsAre(100));
  EXPECT_THAT(Successors(table, 5), ElementsAre(200));
  // A third block in the row replaces block 1, the older update.
  table.Insert(9, 300);
  EXPECT_THAT(Successors(table, 1), IsEmpty());
  EXPECT_THAT(Successors(table, 5), ElementsAre(200));
  EXPECT_THAT(Successors(table, 9), ElementsAre(300));
  // Updating 5 makes 9 the older way; 13 replaces it, successors and all.
  table.Insert(5, 201);
  table.Insert(13, 400);
  EXPECT_THAT(Successors(table, 9), IsEmpty());
  EXPECT_THAT(Successors(table, 5), ElementsAre(201, 200));
  EXPECT_THAT(Successors(table, 13), ElementsAre(400));
  // Other rows are untouched by all of this.
  table.Insert(2, 7);
  EXPECT_THAT(Successors(table, 2), ElementsAre(7));
  EXPECT_THAT(Successors(table, 13), ElementsAre(400));
}

TEST(BlockTableTest, OneRowOneWayRemembersOnlyTheLastBlock) {
  BlockTable table(/*rows=*/1, /*assoc=*/1, /*succs=*/4);
  table.Insert(1, 2);
  table.Insert(2, 3);
  EXPECT_THAT(Successors(table, 1), IsEmpty());
  EXPECT_THAT(Successors(table, 2), ElementsAre(3));
}

TEST(BlockTableTest, ReportsItsMemory) {
  const BlockTable small(16, 2, 4), large(2048, 2, 4);
  EXPECT_GE(large.Bytes(), 2048u * 2 * 4 * sizeof(BlockNumber));
  EXPECT_GT(large.Bytes(), small.Bytes());
  EXPECT_EQ(large.Bytes(), sizeof(BlockTable) + BlockTable::RowBytes(2048, 2, 4));
}

// --- Table sizing ----------------------------------------------------------

TEST(BlockTableSizingTest, AGrowingTableAllocatesNothingUntilItsFirstInsert) {
  BlockTable table(/*rows=*/2048, /*assoc=*/2, /*succs=*/4, TableSizing::kGrow);
  EXPECT_EQ(table.rows(), 0);
  EXPECT_EQ(table.Bytes(), sizeof(BlockTable));
  EXPECT_THAT(Successors(table, 7), IsEmpty());
  table.Insert(7, 8);
  // 2048 is a power of two: the first table has one row.
  EXPECT_EQ(table.rows(), 1);
  EXPECT_THAT(Successors(table, 7), ElementsAre(8));
}

TEST(BlockTableSizingTest, RowsDoubleUntilNoRowOverflows) {
  // K consecutive blocks with successors need the smallest power-of-two row
  // count that puts at most `assoc` of them in a row: ceil(K / 2) rounded up.
  for (const auto& [blocks, rows] : std::vector<std::pair<int, int>>{
           {1, 1}, {2, 1}, {3, 2}, {5, 4}, {100, 64}, {129, 128}, {4096, 2048}}) {
    BlockTable table(/*rows=*/2048, /*assoc=*/2, /*succs=*/4, TableSizing::kGrow);
    for (int b = 0; b < blocks; ++b) table.Insert(1000 + b, 1000 + b + 1);
    EXPECT_EQ(table.rows(), rows) << blocks << " blocks";
    EXPECT_EQ(table.Bytes(), sizeof(BlockTable) + BlockTable::RowBytes(rows, 2, 4));
  }
  // Beyond NumRows the table stops growing and conflicts evict, as in a
  // fixed table: 4097 blocks in 2048 x 2 ways lose the first one.
  BlockTable table(/*rows=*/2048, /*assoc=*/2, /*succs=*/4, TableSizing::kGrow);
  for (int b = 0; b <= 4096; ++b) table.Insert(1000 + b, 1000 + b + 1);
  EXPECT_EQ(table.rows(), 2048);
  EXPECT_THAT(Successors(table, 1000), IsEmpty());
  EXPECT_THAT(Successors(table, 1001), ElementsAre(1002));
}

TEST(BlockTableSizingTest, NumRowsThatIsNotAPowerOfTwoGrowsFromItsOddPart) {
  BlockTable table(/*rows=*/12, /*assoc=*/1, /*succs=*/1, TableSizing::kGrow);
  table.Insert(0, 1);
  EXPECT_EQ(table.rows(), 3);
  table.Insert(3, 1);  // row 0 of 3 is taken: 6 rows
  EXPECT_EQ(table.rows(), 6);
  table.Insert(6, 1);  // row 0 of 6 is taken: 12 rows, the bound
  EXPECT_EQ(table.rows(), 12);
  table.Insert(12, 1);  // row 0 of 12: a conflict now, 0 is replaced
  EXPECT_EQ(table.rows(), 12);
  EXPECT_THAT(Successors(table, 0), IsEmpty());
  EXPECT_THAT(Successors(table, 12), ElementsAre(1));
}

TEST(BlockTableSizingTest, AGrowingTablePredictsExactlyWhatAFixedOneDoes) {
  // A pseudo-random stream over 64 blocks into 8 rows x 2 ways: conflicts
  // once grown, and every lookup answers the same as the full table's.
  BlockTable grow(/*rows=*/8, /*assoc=*/2, /*succs=*/3, TableSizing::kGrow);
  BlockTable fixed(/*rows=*/8, /*assoc=*/2, /*succs=*/3, TableSizing::kFixed);
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<BlockNumber>((state >> 33) % 64);
  };
  BlockNumber last = next();
  for (int step = 0; step < 2000; ++step) {
    const BlockNumber block = next();
    grow.Insert(last, block);
    fixed.Insert(last, block);
    last = block;
    for (BlockNumber b = 0; b < 64; ++b) {
      ASSERT_EQ(Successors(grow, b), Successors(fixed, b)) << "step " << step << " block " << b;
    }
  }
  EXPECT_EQ(grow.rows(), 8);
}

// --- The execution-id table -----------------------------------------------

TEST(ExecutionTableTest, PredictsFromTheThreeKernelsBefore) {
  ExecutionTable table;
  EXPECT_FALSE(table.Predict({1, 2, 3, 4}).has_value());
  // Kernel 4 is followed by 5 after (1, 2, 3) and by 6 after (7, 2, 3).
  table.Record({1, 2, 3, 4}, 5);
  table.Record({7, 2, 3, 4}, 6);
  EXPECT_EQ(table.Predict({1, 2, 3, 4}), 5u);
  EXPECT_EQ(table.Predict({7, 2, 3, 4}), 6u);
  EXPECT_FALSE(table.Predict({8, 2, 3, 4}).has_value());
  EXPECT_EQ(table.records(4), 2u);
  // The same context with a new successor keeps the newest.
  table.Record({1, 2, 3, 4}, 9);
  EXPECT_EQ(table.Predict({1, 2, 3, 4}), 9u);
  EXPECT_EQ(table.records(4), 2u);
  // Records per id are unbounded.
  for (uint32_t before = 100; before < 1100; ++before) table.Record({before, 2, 3, 4}, before);
  EXPECT_EQ(table.records(4), 1002u);
  EXPECT_EQ(table.Predict({555, 2, 3, 4}), 555u);
}

// --- The policy's decisions, through a fake engine ------------------------

// Records what the policy asks of the engine; memory is a real MemoryState
// the test arranges by hand.
class FakeContext final : public PolicyContext {
 public:
  explicit FakeContext(uint64_t capacity_frames) : memory_(capacity_frames) {}

  const MemoryView& memory() const override { return memory_; }
  Nanos now() const override { return now_; }
  uint32_t current_exec_id() const override { return 0; }
  void Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) override {
    EXPECT_EQ(pages, FullPageMask());
    prefetches.emplace_back(block, exec_id);
  }
  void Populate(BlockNumber, const PageMask&) override {
    ADD_FAILURE() << "deepum never populates ahead";
  }
  void CancelPrefetches() override { ++cancels; }
  size_t queued_prefetches() const override { return prefetches.size(); }
  void PreEvict(BlockNumber block) override { pre_evictions.push_back(block); }
  void PreEvictPages(BlockNumber, const PageMask&, MemoryTier) override {
    ADD_FAILURE() << "deepum pre-evicts whole blocks";
  }
  void Discard(BlockNumber, const PageMask&) override {
    ADD_FAILURE() << "deepum invalidates through PagesToDrop, not Discard";
  }
  void SetPinned(BlockNumber block, bool pinned) override { memory_.Get(block).pinned = pinned; }
  void MapRemote(BlockNumber, const PageMask&) override {}  // deepum never maps remotely
  void UnmapRemote(BlockNumber, const PageMask&) override {}

  // Gives `block` a frame, migrated at `time`.
  void MakeResident(BlockNumber block, Nanos time) {
    BlockState& state = memory_.Get(block);
    state.resident = FullPageMask();
    memory_.ClaimFrame(state, time);
  }

  MemoryState memory_;
  Nanos now_ = 0;
  std::vector<std::pair<BlockNumber, uint32_t>> prefetches;
  std::vector<BlockNumber> pre_evictions;
  int cancels = 0;
};

FaultEntry Fault(BlockNumber block, uint32_t exec_id) {
  FaultEntry entry;
  entry.page = FirstPageOfBlock(block);
  entry.exec_id = exec_id;
  return entry;
}

// Runs one kernel through the hooks: begin, one fault batch per block in
// `faults`, end.
void RunKernel(DeepUmPolicy& policy, uint32_t exec_id, const std::vector<BlockNumber>& faults) {
  policy.OnKernelBegin(exec_id);
  for (BlockNumber block : faults) {
    const FaultEntry entry = Fault(block, exec_id);
    const FaultedBlock grouped{block, PageMask().set(0), PageMask()};
    policy.OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                   absl::MakeConstSpan(&grouped, 1)});
  }
  policy.OnKernelEnd(exec_id);
}

// Four kernels: 1 faults 10, 11, 12; 2 faults 20, 21; 3 faults 30; 4 faults 40.
void RunTrainingIteration(DeepUmPolicy& policy) {
  RunKernel(policy, 1, {10, 11, 12});
  RunKernel(policy, 2, {20, 21});
  RunKernel(policy, 3, {30});
  RunKernel(policy, 4, {40});
}

class DeepUmPolicyTest : public ::testing::Test {
 protected:
  explicit DeepUmPolicyTest(int lookahead = 2) : context_(/*capacity_frames=*/64) {
    DeepUmOptions options;
    options.lookahead = lookahead;
    policy_ = std::make_unique<DeepUmPolicy>(options);
    policy_->Bind(&context_);
  }

  // Two iterations teach every transition with its full three-kernel context.
  void Learn() {
    RunTrainingIteration(*policy_);
    RunTrainingIteration(*policy_);
    context_.prefetches.clear();
    context_.cancels = 0;
  }

  FakeContext context_;
  std::unique_ptr<DeepUmPolicy> policy_;
};

TEST_F(DeepUmPolicyTest, RecordsStartEndAndSuccessorsPerKernel) {
  RunTrainingIteration(*policy_);
  const BlockTable* first = policy_->block_table(1);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->start, 10u);
  EXPECT_EQ(first->end, 12u);
  EXPECT_THAT(Successors(*first, 10), ElementsAre(11));
  EXPECT_THAT(Successors(*first, 11), ElementsAre(12));
  // Successors are per kernel: 12 -> 20 crosses a kernel boundary.
  EXPECT_THAT(Successors(*first, 12), IsEmpty());
  ASSERT_NE(policy_->block_table(2), nullptr);
  EXPECT_EQ(policy_->block_table(2)->start, 20u);
  EXPECT_EQ(policy_->block_table(2)->end, 21u);
  EXPECT_EQ(policy_->block_table(3)->start, policy_->block_table(3)->end);
  // Transitions 1->2, 2->3, 3->4 are in the execution table.
  EXPECT_EQ(policy_->execution_table().Predict({0, 0, 0, 1}), 2u);
  EXPECT_EQ(policy_->execution_table().Predict({0, 1, 2, 3}), 4u);
  // Each table grew only to the rows its kernel's few faults needed: all
  // four together are smaller than one full 2048-row table.
  uint64_t block_table_bytes = 0;
  for (uint32_t id = 1; id <= 4; ++id) block_table_bytes += policy_->block_table(id)->Bytes();
  EXPECT_GE(policy_->TableBytes(), policy_->execution_table().Bytes() + block_table_bytes);
  EXPECT_LT(policy_->TableBytes(), BlockTable::RowBytes(2048, 2, 4));
}

TEST_F(DeepUmPolicyTest, ChainsAcrossKernelsAndPausesAfterNKernels) {
  Learn();
  // Kernel 1 begins as the paused chain predicted; a fault on 10 restarts
  // chaining from there: kernel 1's blocks from 10 to its end block, then the
  // predicted kernels 2 and 3 from their start blocks. N = 2, so chaining
  // pauses before kernel 4.
  policy_->OnKernelBegin(1);
  const FaultEntry entry = Fault(10, 1);
  const FaultedBlock grouped{10, PageMask().set(0), PageMask()};
  policy_->OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                   absl::MakeConstSpan(&grouped, 1)});
  using P = std::pair<BlockNumber, uint32_t>;
  EXPECT_THAT(context_.prefetches,
              ElementsAre(P{10, 1}, P{11, 1}, P{12, 1}, P{20, 2}, P{21, 2}, P{30, 3}));
  EXPECT_THAT(policy_->PredictedKernels(), ElementsAre(1, 2, 3));
  EXPECT_TRUE(policy_->chaining());
  EXPECT_TRUE(policy_->IsPredicted(30));
  EXPECT_FALSE(policy_->IsPredicted(40));

  // Kernel 1 ends: chaining resumes for one more kernel (4).
  context_.prefetches.clear();
  policy_->OnKernelEnd(1);
  EXPECT_THAT(context_.prefetches, ElementsAre(P{40, 4}));
  EXPECT_THAT(policy_->PredictedKernels(), ElementsAre(2, 3, 4));
  EXPECT_FALSE(policy_->IsPredicted(10));
  // Kernel 2 begins as predicted: nothing is cancelled.
  policy_->OnKernelBegin(2);
  EXPECT_EQ(context_.cancels, 1);  // only the restart at the fault
  // ... and ends: kernel 1 of the next iteration comes after (2, 3, 4). Its
  // last execution faulted only on 10, so by §4.2's rule 10 is now both its
  // start and its end block, and the walk stops there.
  EXPECT_EQ(policy_->block_table(1)->end, 10u);
  context_.prefetches.clear();
  policy_->OnKernelEnd(2);
  EXPECT_THAT(context_.prefetches, ElementsAre(P{10, 1}));
  EXPECT_EQ(policy_->mispredictions(), 0u);
}

TEST_F(DeepUmPolicyTest, ANewFaultRestartsTheChainFromTheFaultedBlock) {
  Learn();
  RunKernel(*policy_, 1, {10});  // starts a chain; ends kernel 1
  policy_->OnKernelBegin(2);
  context_.prefetches.clear();
  const int cancels = context_.cancels;
  const FaultEntry entry = Fault(21, 2);
  const FaultedBlock grouped{21, PageMask().set(0), PageMask()};
  policy_->OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                   absl::MakeConstSpan(&grouped, 1)});
  // The queue is dropped and chaining restarts at 21 (kernel 2's end block),
  // then kernels 3 and 4.
  EXPECT_EQ(context_.cancels, cancels + 1);
  using P = std::pair<BlockNumber, uint32_t>;
  EXPECT_THAT(context_.prefetches, ElementsAre(P{21, 2}, P{30, 3}, P{40, 4}));
  EXPECT_GE(policy_->chain_aborts(), 1u);
}

TEST_F(DeepUmPolicyTest, AWrongPredictionAbortsTheChain) {
  Learn();
  RunKernel(*policy_, 1, {10});  // chain: 1, 2, 3; then 4 after kernel 1 ends
  const int cancels = context_.cancels;
  policy_->OnKernelBegin(3);  // 2 was predicted
  EXPECT_EQ(policy_->mispredictions(), 1u);
  EXPECT_EQ(context_.cancels, cancels + 1);
  EXPECT_FALSE(policy_->chaining());
  EXPECT_THAT(policy_->PredictedKernels(), IsEmpty());
  EXPECT_FALSE(policy_->IsPredicted(30));
}

TEST_F(DeepUmPolicyTest, AnUnknownNextKernelEndsChainingButKeepsTheQueue) {
  // One iteration only: contexts that include the previous iteration are
  // unknown, so after kernel 4 nothing can be predicted.
  RunTrainingIteration(*policy_);
  RunKernel(*policy_, 1, {});
  policy_->OnKernelBegin(2);
  context_.prefetches.clear();
  const int cancels = context_.cancels;
  const FaultEntry entry = Fault(20, 2);
  const FaultedBlock grouped{20, PageMask().set(0), PageMask()};
  policy_->OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                   absl::MakeConstSpan(&grouped, 1)});
  // Kernel 2 after (3, 4, 1) was never seen (the first iteration saw it
  // after (0, 0, 1)): the chain holds kernel 2 only and stops.
  using P = std::pair<BlockNumber, uint32_t>;
  EXPECT_THAT(context_.prefetches, ElementsAre(P{20, 2}, P{21, 2}));
  EXPECT_FALSE(policy_->chaining());
  EXPECT_EQ(context_.cancels, cancels + 1);  // the restart, not a second abort
  EXPECT_TRUE(policy_->IsPredicted(21));
}

TEST_F(DeepUmPolicyTest, PreEvictsTheOldestBlockNotPredictedSoon) {
  FakeContext context(/*capacity_frames=*/3);
  DeepUmPolicy policy{DeepUmOptions{}};
  policy.Bind(&context);
  // Kernel 1 faults on 5 then 6, five times: by then the context
  // (1, 1, 1) -> 1 is known and kernel 1 predicts itself.
  for (int i = 0; i < 5; ++i) RunKernel(policy, 1, {5, 6});
  // Memory: 5 migrated first (oldest), then 7, then 8. Full.
  context.MakeResident(5, 100);
  context.MakeResident(7, 200);
  context.MakeResident(8, 300);
  ASSERT_EQ(context.memory().free_frames(), 0u);
  // Kernel 1 begins; a fault on 5 chains 5, 6, then kernel 1 again.
  policy.OnKernelBegin(1);
  const FaultEntry entry = Fault(5, 1);
  const FaultedBlock grouped{5, PageMask().set(0), PageMask()};
  policy.OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                 absl::MakeConstSpan(&grouped, 1)});
  ASSERT_TRUE(policy.IsPredicted(5));
  // 5 is least recently migrated but predicted; 7 is the victim.
  ASSERT_FALSE(context.pre_evictions.empty());
  EXPECT_EQ(context.pre_evictions.back(), 7u);
  EXPECT_EQ(policy.ChooseVictim(VictimQuery{VictimReason::kFault, 6}), 7u);
  // With nothing unpredicted, a prefetch finds no victim, a fault still does.
  context.pre_evictions.clear();
  policy.OnFreeSpaceChanged(0);
  EXPECT_TRUE(context.pre_evictions.empty());  // 7 is still pending
}

TEST(DeepUmVictimTest, APrefetchNeverEvictsAPredictedBlock) {
  FakeContext context(/*capacity_frames=*/2);
  DeepUmPolicy policy{DeepUmOptions{}};
  policy.Bind(&context);
  for (int i = 0; i < 5; ++i) RunKernel(policy, 1, {5, 6});
  context.MakeResident(5, 100);
  context.MakeResident(6, 200);
  policy.OnKernelBegin(1);
  const FaultEntry entry = Fault(5, 1);
  const FaultedBlock grouped{5, PageMask().set(0), PageMask()};
  policy.OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(&entry, 1),
                                 absl::MakeConstSpan(&grouped, 1)});
  ASSERT_TRUE(policy.IsPredicted(5));
  ASSERT_TRUE(policy.IsPredicted(6));
  EXPECT_TRUE(context.pre_evictions.empty());
  EXPECT_FALSE(policy.ChooseVictim(VictimQuery{VictimReason::kPrefetch, 9}).has_value());
  EXPECT_EQ(policy.ChooseVictim(VictimQuery{VictimReason::kFault, 9}), 5u);
}

TEST(DeepUmInvalidationTest, DropsOnlyInactivePagesOfTheVictim) {
  BlockState victim;
  victim.resident = PageRangeMask(0, 400);
  victim.inactive = PageRangeMask(256, 256);  // the upper half is free
  FakeContext context(4);
  DeepUmOptions with;
  DeepUmPolicy deepum(with);
  deepum.Bind(&context);
  // Inactive and resident: pages 256..399. Active pages stay to be written back.
  EXPECT_EQ(deepum.PagesToDrop(victim), PageRangeMask(256, 144));
  DeepUmOptions without;
  without.invalidate = false;
  DeepUmPolicy preevict(without);
  preevict.Bind(&context);
  EXPECT_EQ(preevict.PagesToDrop(victim), PageMask());
}

// --- The whole policy on the sim ------------------------------------------

// Block 0 is written, then its upper half is freed by the allocator; block 1
// is written and needs block 0's frame (two frames, pre-eviction keeps one
// free); kernel 3 reads block 0's lower half again.
ProgramBuilder HalfInactiveBlock() {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Iteration(0);
  p.Kernel(1, 1000, {0}, /*write=*/true);
  p.Deactivate(ProgramBuilder::BlockAddress(0) + kBlockSize / 2, kBlockSize / 2);
  p.Kernel(2, 1000, {1}, /*write=*/true);
  p.Kernel(3, 1000, {2}, /*write=*/true);
  p.Begin(4, 1000).Access(ProgramBuilder::BlockAddress(0), kBlockSize / 2, false).End(4);
  return p;
}

SimRun RunPreset(const ProgramBuilder& program, uint64_t frames, bool invalidate) {
  DeepUmOptions options;
  options.invalidate = invalidate;
  DeepUmPolicy policy(options);
  return RunOnSim(program, frames, policy);
}

TEST(DeepUmSimTest, InvalidationSkipsTheWriteBackOfInactivePagesOnly) {
  const SimRun with = RunPreset(HalfInactiveBlock(), 2, /*invalidate=*/true);
  const SimRun without = RunPreset(HalfInactiveBlock(), 2, /*invalidate=*/false);
  ASSERT_TRUE(with.status.ok()) << with.status;
  ASSERT_TRUE(without.status.ok()) << without.status;
  // Block 0 leaves once: its inactive half is dropped, its active half (the
  // data kernel 4 reads back) is written back and returns by copy.
  EXPECT_EQ(with.stats.invalidated_bytes, kBlockSize / 2);
  EXPECT_EQ(without.stats.invalidated_bytes, 0u);
  EXPECT_EQ(without.stats.d2h_bytes - with.stats.d2h_bytes, kBlockSize / 2);
  EXPECT_EQ(with.stats.h2d_bytes, kBlockSize / 2);
  EXPECT_EQ(without.stats.h2d_bytes, kBlockSize);
}

// Eight blocks, four frames, four kernels of two blocks each, repeated: the
// tables learn the order in the first iterations and later ones prefetch it.
ProgramBuilder RepeatedKernels(int iterations) {
  ProgramBuilder p;
  p.Alloc(0, 8);
  for (int it = 0; it < iterations; ++it) {
    p.Iteration(it);
    for (uint32_t k = 0; k < 4; ++k) {
      p.Kernel(k + 1, 10000000, {static_cast<int>(2 * k), static_cast<int>(2 * k + 1)}, true);
    }
  }
  return p;
}

TEST(DeepUmSimTest, LearnedChainsRemoveSteadyStateFaults) {
  // N = 1: the current kernel and the next one fill the four frames, and the
  // blocks of the kernel before are the unpredicted victims.
  DeepUmOptions options;
  options.lookahead = 1;
  DeepUmPolicy deepum(options);
  const SimRun run = RunOnSim(RepeatedKernels(6), 4, deepum);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.stats.per_iteration.size(), 6u);
  // Iteration 0 faults on every block: 8 blocks x 4 SMs. Later iterations
  // prefetch by the learned chains, but §4.2's capture rule re-learns a
  // kernel's start and end blocks from whatever it faulted on last time: a
  // kernel that faulted only on its second block has that block as start
  // and end, so the next walk skips the first one. At most half the blocks
  // fault once the tables are warm (docs/policies.md discusses this).
  ASSERT_EQ(run.stats.per_iteration[0].faults, 32u);
  for (size_t it = 3; it < 6; ++it) {
    EXPECT_LE(run.stats.per_iteration[it].faults, 16u) << "iteration " << it;
  }
  EXPECT_GT(run.stats.prefetch_bytes, 0u);
  EXPECT_EQ(deepum.mispredictions(), 0u);
}

// One kernel that reads blocks 0..99 in order, all resident after.
ProgramBuilder HundredBlockKernel() {
  ProgramBuilder p;
  p.Alloc(0, 100);
  std::vector<int> blocks(100);
  for (int b = 0; b < 100; ++b) blocks[b] = b;
  p.Iteration(0);
  p.Kernel(1, 1000, blocks);
  return p;
}

TEST(DeepUmSizingTest, AKernelsTableFitsTheBlocksItFaultedOn) {
  DeepUmOptions grow_options;
  DeepUmPolicy grow(grow_options);
  ASSERT_TRUE(RunOnSim(HundredBlockKernel(), 128, grow).status.ok());
  DeepUmOptions fixed_options;
  fixed_options.sizing = TableSizing::kFixed;
  DeepUmPolicy fixed(fixed_options);
  ASSERT_TRUE(RunOnSim(HundredBlockKernel(), 128, fixed).status.ok());

  // More than 64 of the 100 consecutive blocks have a successor: 32 rows
  // would put three in a row, 64 rows put at most two.
  ASSERT_NE(grow.block_table(1), nullptr);
  EXPECT_EQ(grow.block_table(1)->rows(), 64);
  EXPECT_EQ(fixed.block_table(1)->rows(), 2048);
  // The tables' memory is what they allocated: the same events leave the
  // same execution table, so the totals differ by the rows alone.
  EXPECT_EQ(fixed.TableBytes() - grow.TableBytes(),
            BlockTable::RowBytes(2048, 2, 4) - BlockTable::RowBytes(64, 2, 4));
  EXPECT_GE(grow.TableBytes(), grow.execution_table().Bytes() + grow.block_table(1)->Bytes());
}

TEST(DeepUmSizingTest, RowsBoundTheGrowth) {
  DeepUmOptions options;
  options.rows = 16;
  DeepUmPolicy deepum(options);
  ASSERT_TRUE(RunOnSim(HundredBlockKernel(), 128, deepum).status.ok());
  EXPECT_EQ(deepum.block_table(1)->rows(), 16);
}

TEST(DeepUmSizingTest, TheSizingParameterIsChecked) {
  EXPECT_TRUE(Policies().Create("deepum:table_sizing=fixed").ok());
  EXPECT_TRUE(Policies().Create("deepum:table_sizing=grow,rows=512").ok());
  const auto policy = Policies().Create("deepum:table_sizing=lazy");
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(std::string(policy.status().message()), ::testing::HasSubstr("table_sizing=lazy is not one of: grow, fixed"));
}

}  // namespace
}  // namespace umlab::testing
