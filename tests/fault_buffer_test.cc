#include "emu/fault_buffer.h"

#include <vector>

#include <gtest/gtest.h>

namespace umlab {
namespace {

FaultEntry Entry(PageNumber page) { return FaultEntry{page, AccessType::kRead, 0, 0, 0}; }

TEST(FaultBufferTest, KeepsDuplicatesInArrivalOrder) {
  FaultBuffer buffer(8);
  for (PageNumber page : {5, 5, 3, 5}) ASSERT_TRUE(buffer.Push(Entry(page)));
  std::vector<FaultEntry> out(8);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 4u);
  EXPECT_EQ(out[0].page, 5u);
  EXPECT_EQ(out[1].page, 5u);
  EXPECT_EQ(out[2].page, 3u);
  EXPECT_EQ(out[3].page, 5u);
  EXPECT_TRUE(buffer.empty());
}

TEST(FaultBufferTest, OverflowDropsNewEntriesAndCountsThem) {
  FaultBuffer buffer(2);
  EXPECT_TRUE(buffer.Push(Entry(1)));
  EXPECT_TRUE(buffer.Push(Entry(2)));
  EXPECT_FALSE(buffer.Push(Entry(3)));
  EXPECT_EQ(buffer.dropped(), 1u);
  std::vector<FaultEntry> out(1);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 1u);
  EXPECT_EQ(out[0].page, 1u);
  EXPECT_TRUE(buffer.Push(Entry(4)));  // room again, and the ring wraps
  std::vector<FaultEntry> rest(4);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(rest)), 2u);
  EXPECT_EQ(rest[0].page, 2u);
  EXPECT_EQ(rest[1].page, 4u);
}

TEST(FaultBufferTest, FetchTakesAtMostABatchAndFlushEmpties) {
  FaultBuffer buffer(16);
  for (PageNumber page = 0; page < 10; ++page) buffer.Push(Entry(page));
  std::vector<FaultEntry> out(4);
  EXPECT_EQ(buffer.Fetch(absl::MakeSpan(out)), 4u);
  EXPECT_EQ(buffer.size(), 6u);
  buffer.Flush();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.Fetch(absl::MakeSpan(out)), 0u);
}

TEST(FaultBufferTest, FlushToLastFetchKeepsWhatCameAfterTheFetch) {
  FaultBuffer buffer(8);
  for (PageNumber page = 0; page < 6; ++page) buffer.Push(Entry(page));
  std::vector<FaultEntry> out(4);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 4u);  // 4 and 5 stay, past the batch
  buffer.Push(Entry(6));                              // raised while it was serviced
  buffer.Push(Entry(7));
  buffer.FlushToLastFetch();
  ASSERT_EQ(buffer.size(), 2u);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 2u);
  EXPECT_EQ(out[0].page, 6u);
  EXPECT_EQ(out[1].page, 7u);
  buffer.FlushToLastFetch();  // nothing came since: nothing to flush
  EXPECT_TRUE(buffer.empty());
  buffer.Push(Entry(8));
  buffer.Flush();
  EXPECT_TRUE(buffer.empty());
}

TEST(FaultBufferTest, CountsTheDuplicatesOfTheLastFetch) {
  FaultBuffer buffer(8);
  for (PageNumber page : {5, 5, 3, 5, 3, 9}) buffer.Push(Entry(page));
  std::vector<FaultEntry> out(5);
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 5u);
  EXPECT_EQ(buffer.last_fetch_count(), 5u);
  EXPECT_EQ(buffer.last_fetch_duplicates(), 3u);  // 5 twice more, 3 once more
  ASSERT_EQ(buffer.Fetch(absl::MakeSpan(out)), 1u);
  EXPECT_EQ(buffer.last_fetch_duplicates(), 0u);
}

}  // namespace
TEST(FaultBufferTest, WrapsAroundTheRingInArrivalOrder) {
  FaultBuffer buffer(3);
  std::vector<FaultEntry> out(3);
  PageNumber next = 0, expected = 0;
  // Pushes and fetches that never line up with the ring's size, so the
  // head and tail cross the end many times.
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(buffer.Push(Entry(next++)));
    const size_t fetched = buffer.Fetch(absl::MakeSpan(out.data(), round % 2 == 0 ? 1 : 3));
    for (size_t i = 0; i < fetched; ++i) EXPECT_EQ(out[i].page, expected++);
  }
  while (size_t fetched = buffer.Fetch(absl::MakeSpan(out))) {
    for (size_t i = 0; i < fetched; ++i) EXPECT_EQ(out[i].page, expected++);
  }
  EXPECT_EQ(expected, next);
  EXPECT_EQ(buffer.dropped(), 0u);
}

}  // namespace umlab
