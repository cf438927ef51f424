// CUPTI's record delivery as the sim models it: collections, full buffers,
// flushes.
#include "backends/emu/cupti_record_stream.h"

#include <vector>

#include <gtest/gtest.h>

namespace umlab {
namespace {

using Record = CuptiRecordStream::Record;

// Collections every 16 ms, flushes starting every 3 ms and ending 2 ms
// later, buffers of 10 records.
CuptiRecordStreamConfig Config(uint64_t buffer_records) {
  return {.collect_period_ns = 16'000'000,
          .flush_pause_ns = 1'000'000,
          .flush_cost_ns = 2'000'000,
          .buffer_records = buffer_records};
}

Record Arrival(Nanos time, BlockNumber block, uint64_t count = 1) {
  return {.time = time, .kind = Record::Kind::kArrival, .block = block, .count = count};
}

// Runs the stream's events up to `until` and returns the blocks handed
// over, with the instant each flush ended.
std::vector<std::pair<Nanos, BlockNumber>> Deliveries(CuptiRecordStream& stream, Nanos until) {
  std::vector<std::pair<Nanos, BlockNumber>> out;
  for (Nanos now = stream.NextEventTime(); now <= until; now = stream.NextEventTime()) {
    stream.CollectUntil(now);
    const Nanos flush_start = now - 2'000'000;
    if (stream.FrontDeliveryTime() <= now) {
      while (stream.FrontFlushable(flush_start)) {
        out.emplace_back(now, stream.front().block);
        stream.PopFront();
      }
    }
    if (stream.NextEventTime() <= now) {
      ADD_FAILURE() << "no progress at " << now;
      break;
    }
  }
  return out;
}

TEST(CuptiRecordStreamTest, RecordsCountByBytes) {
  EXPECT_EQ(CuptiRecordStream::RecordsFor(0, 16 << 10), 1u);  // never none
  EXPECT_EQ(CuptiRecordStream::RecordsFor(2 << 20, 16 << 10), 128u);
  EXPECT_EQ(CuptiRecordStream::RecordsFor(2 << 20, 800 << 10), 3u);  // 2.6, rounded
}

TEST(CuptiRecordStreamTest, UnbufferedRecordsComeAtTheFirstFlushAfterTheirCollection) {
  CuptiRecordStream stream(Config(0));
  stream.Push(Arrival(1'000'000, 7));
  stream.Push(Arrival(17'000'000, 8));
  // Collected at 16 ms, by the flush that starts at 18 ms: heard at 20 ms.
  // The next, collected at 32 ms, by the flush of 33 ms: heard at 35 ms.
  const auto heard = Deliveries(stream, 100'000'000);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::make_pair(Nanos{20'000'000}, BlockNumber{7}));
  EXPECT_EQ(heard[1], std::make_pair(Nanos{35'000'000}, BlockNumber{8}));
}

TEST(CuptiRecordStreamTest, AFlushHandsOverOnlyFullBuffers) {
  CuptiRecordStream stream(Config(10));
  // Nine single records fill no buffer: nothing is heard however long one
  // waits.
  for (int i = 0; i < 9; ++i) stream.Push(Arrival(1'000'000 + i, 100 + i));
  EXPECT_TRUE(Deliveries(stream, 200'000'000).empty());
  EXPECT_EQ(stream.NextEventTime(), kNever);
  // A copy of 5 records at 40 ms fills the buffer at the 48 ms collection:
  // all ten are heard at the end of the flush that starts at 48 ms.
  stream.Push(Arrival(40'000'000, 200, 5));
  const auto heard = Deliveries(stream, 200'000'000);
  ASSERT_EQ(heard.size(), 10u);
  for (const auto& [when, block] : heard) EXPECT_EQ(when, 50'000'000) << block;
  EXPECT_EQ(heard.back().second, 200u);
  // Its other 4 records start the next buffer: a record of 6 fills it at
  // the 64 ms collection, and the flush that starts at 66 ms hands it over.
  stream.Push(Arrival(60'000'000, 300, 6));
  const auto next = Deliveries(stream, 200'000'000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0], std::make_pair(Nanos{68'000'000}, BlockNumber{300}));
}

TEST(CuptiRecordStreamTest, ARecordIsHeardWithTheBufferOfItsFirstRecord) {
  CuptiRecordStream stream(Config(10));
  stream.Push(Arrival(1'000'000, 1, 8));
  // Its first record lies in the buffer the 16 ms collection fills
  // (records 8 to 32 of the stream); the record after it, in the buffer
  // that collection leaves partial.
  stream.Push(Arrival(2'000'000, 2, 25));
  stream.Push(Arrival(3'000'000, 3, 1));
  const auto heard = Deliveries(stream, 200'000'000);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[1].second, 2u);
  // The final flush hands over what the partial buffer holds.
  ASSERT_FALSE(stream.empty());
  EXPECT_TRUE(stream.FrontFlushable(kNever));
  EXPECT_EQ(stream.front().block, 3u);
  stream.PopFront();
  EXPECT_TRUE(stream.empty());
  EXPECT_EQ(stream.NextEventTime(), kNever);
}

}  // namespace
}  // namespace umlab
