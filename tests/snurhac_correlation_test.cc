// SnuRHAC's correlation prefetching (policies/snurhac_correlation) and the
// multi-level correlation table it shares with DeepUM (core/correlation_table.h).
#include "policies/snurhac_correlation/snurhac_correlation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "core/correlation_table.h"
#include "core/memory_state.h"
#include "core/policy.h"

namespace umlab {
namespace {

std::vector<uint64_t> Successors(const CorrelationTable& table, uint64_t key, int level) {
  absl::Span<const uint64_t> span = table.Successors(key, level);
  return {span.begin(), span.end()};
}

// Figure 5.2(a): misses a, b, c. a has b on level 0 and c on level 1.
TEST(CorrelationTableTest, KeepsOneListPerLevel) {
  CorrelationTable table(CorrelationShape{16, 2, 2, 3});
  table.Insert(1, 2, 0);  // b after a
  table.Insert(2, 3, 0);  // c after b
  table.Insert(1, 3, 1);  // c two after a
  EXPECT_EQ(Successors(table, 1, 0), (std::vector<uint64_t>{2}));
  EXPECT_EQ(Successors(table, 1, 1), (std::vector<uint64_t>{3}));
  EXPECT_TRUE(Successors(table, 1, 2).empty());
  EXPECT_EQ(Successors(table, 2, 0), (std::vector<uint64_t>{3}));
  // Levels beyond the table's, and keys it never saw, have nothing.
  EXPECT_TRUE(Successors(table, 1, 3).empty());
  EXPECT_TRUE(Successors(table, 9, 0).empty());
}

TEST(CorrelationTableTest, ASingleLevelTableTakesTheMemoryDeepUmsDid) {
  // One level of NumSuccs successors and a 24-byte way: what DeepUM's block
  // tables took before the table was shared (policies/deepum).
  EXPECT_EQ(CorrelationTable::RowBytes(2048, CorrelationShape{2048, 2, 4, 1}),
            2048u * 2 * (24 + 4 * 8));
  // SnuRHAC's default: 64k rows x 4 ways x 3 levels x 4 successors; the
  // thesis puts it at "approximately 12MB" (§7.3.2) with 4-byte entries.
  EXPECT_EQ(CorrelationTable::RowBytes(65536, CorrelationShape{65536, 4, 4, 3}),
            65536u * 4 * (24 + 12 * 8));
}

// What the policy asks for.
class RecordingContext final : public PolicyContext {
 public:
  const MemoryView& memory() const override { return memory_; }
  Nanos now() const override { return 0; }
  uint32_t current_exec_id() const override { return 7; }
  void Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) override {
    EXPECT_EQ(exec_id, 7u);
    for (int index = 0; index < kPagesPerBlock; ++index) {
      if (pages.test(index)) prefetched.push_back(FirstPageOfBlock(block) + index);
    }
  }
  void Populate(BlockNumber, const PageMask&) override { ADD_FAILURE(); }
  void CancelPrefetches() override { ADD_FAILURE(); }
  size_t queued_prefetches() const override { return 0; }
  void PreEvict(BlockNumber) override { ADD_FAILURE(); }
  void PreEvictPages(BlockNumber, const PageMask&, MemoryTier) override { ADD_FAILURE(); }
  void Discard(BlockNumber, const PageMask&) override { ADD_FAILURE(); }
  void SetPinned(BlockNumber, bool) override { ADD_FAILURE(); }
  void MapRemote(BlockNumber, const PageMask&) override { ADD_FAILURE(); }
  void UnmapRemote(BlockNumber, const PageMask&) override { ADD_FAILURE(); }

  MemoryState memory_{16};
  std::vector<PageNumber> prefetched;
};

void Miss(Policy& policy, std::vector<PageNumber> pages) {
  std::vector<FaultEntry> raw;
  for (PageNumber page : pages) raw.push_back(FaultEntry{page, AccessType::kRead, 0, 7, 0});
  policy.OnFaultBatch(FaultBatch{0, raw, {}});
}

TEST(SnurhacCorrelationTest, AMissPrefetchesItsSuccessorsOnEveryLevel) {
  RecordingContext context;
  SnurhacCorrelationPolicy policy(CorrelationShape{64, 4, 4, 3}, TableSizing::kFixed);
  policy.Bind(&context);
  // a = 100, b = 7000 (another block), c = 101, d = 5.
  Miss(policy, {100, 7000, 101, 5});
  EXPECT_TRUE(context.prefetched.empty());  // nothing learned yet
  // a again (Figure 5.2(b)): its row holds b, c and d on levels 0 to 2.
  Miss(policy, {100, 100});  // a duplicate in the buffer is one miss
  std::vector<PageNumber> got = context.prefetched;
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<PageNumber>{5, 101, 7000}));
  PolicyStats stats;
  policy.ReportStats(stats);
  EXPECT_GT(policy.TableBytes(), 0u);
}

TEST(SnurhacCorrelationTest, RegistersWithTheThesisDefaults) {
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create("snurhac-correlation");
  ASSERT_TRUE(policy.ok()) << policy.status();
  const auto* correlation = dynamic_cast<const SnurhacCorrelationPolicy*>(policy->get());
  ASSERT_NE(correlation, nullptr);
  const CorrelationShape shape = correlation->table().shape();
  EXPECT_EQ(shape.rows, 65536);
  EXPECT_EQ(shape.assoc, 4);
  EXPECT_EQ(shape.levels, 3);
  EXPECT_EQ(shape.succs, 4);
  EXPECT_FALSE(Policies().Create("snurhac-correlation:levels=5").ok());
}

}  // namespace
}  // namespace umlab
