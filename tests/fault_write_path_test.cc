#include "emu/fault_write_path.h"

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

namespace umlab {
namespace {

FaultEntry Entry(PageNumber page, uint32_t issuer) {
  return FaultEntry{page, AccessType::kRead, issuer, 0, 0};
}

std::vector<PageNumber> FetchAll(FaultBuffer& buffer) {
  std::vector<FaultEntry> out(buffer.capacity());
  const size_t count = buffer.Fetch(absl::MakeSpan(out));
  std::vector<PageNumber> pages;
  for (size_t i = 0; i < count; ++i) pages.push_back(out[i].page);
  return pages;
}

// 64 issuers fault at once on pages 0..63, in page order.
std::vector<PageNumber> WrittenOrder(FaultWritePath& path, FaultBuffer& buffer) {
  for (uint32_t i = 0; i < 64; ++i) path.Raise(Entry(i, i), 1000, buffer);
  path.WriteUntil(1000 + 63 * 20, buffer);
  return FetchAll(buffer);
}

TEST(FaultWritePathTest, WritesOneEntryEveryIntervalFromTheFirstRaise) {
  FaultWritePath path(20);
  FaultBuffer buffer(128);
  for (uint32_t i = 0; i < 64; ++i) path.Raise(Entry(i, i), 1000, buffer);
  EXPECT_EQ(buffer.size(), 1u);  // an idle path writes the first at once
  EXPECT_EQ(path.NextWriteTime(), 1020);
  path.WriteUntil(1199, buffer);
  EXPECT_EQ(buffer.size(), 10u);  // at 1000, 1020, ..., 1180
  path.WriteUntil(1000 + 63 * 20, buffer);
  EXPECT_EQ(buffer.size(), 64u);
  EXPECT_TRUE(path.empty());
  EXPECT_EQ(path.NextWriteTime(), kNever);
}

TEST(FaultWritePathTest, WritesEveryEntryOnceInNoOrderOfAddressAndTheSameEachRun) {
  FaultWritePath path(20), again(20);
  FaultBuffer buffer(128), other(128);
  const std::vector<PageNumber> written = WrittenOrder(path, buffer);
  ASSERT_EQ(written.size(), 64u);
  std::vector<PageNumber> sorted = written;
  std::sort(sorted.begin(), sorted.end());
  for (PageNumber page = 0; page < 64; ++page) EXPECT_EQ(sorted[page], page);
  int ascending = 0;
  for (size_t i = 1; i < written.size(); ++i) ascending += written[i] > written[i - 1];
  EXPECT_GT(ascending, 16);  // page order would be 63, reverse order 0
  EXPECT_LT(ascending, 48);
  EXPECT_EQ(WrittenOrder(again, other), written);
}

TEST(FaultWritePathTest, AnIssuerFaultingAgainReplacesItsWaitingEntry) {
  FaultWritePath path(20);
  FaultBuffer buffer(128);
  path.Raise(Entry(1, 0), 0, buffer);  // written at once
  path.Raise(Entry(2, 1), 0, buffer);
  path.Raise(Entry(3, 1), 5, buffer);  // issuer 1 again, before its turn
  path.WriteUntil(1000, buffer);
  EXPECT_EQ(FetchAll(buffer), (std::vector<PageNumber>{1, 3}));
}

TEST(FaultWritePathTest, WithNoIntervalEntriesGoInAtOnceInTheOrderRaised) {
  FaultWritePath path(0);
  FaultBuffer buffer(2);
  EXPECT_TRUE(path.Raise(Entry(7, 0), 0, buffer));
  EXPECT_TRUE(path.Raise(Entry(3, 0), 0, buffer));
  EXPECT_FALSE(path.Raise(Entry(5, 1), 0, buffer));  // the buffer is full: lost
  EXPECT_TRUE(path.empty());
  EXPECT_EQ(FetchAll(buffer), (std::vector<PageNumber>{7, 3}));
  EXPECT_EQ(buffer.dropped(), 1u);
}

}  // namespace
}  // namespace umlab
