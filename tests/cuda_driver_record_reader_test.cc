// How CUPTI's device-to-host records change the engine's books on the cuda
// backend: the driver's evictions take whole blocks (memory=driver only),
// and a CPU's touch (a host kernel's; cause coherence) takes exactly the
// pages it moved, in either memory mode. Host code only: the records are
// made up here, so it runs wherever the cuda backend is built.
#include <gtest/gtest.h>

#if __has_include("backends/cuda/driver_record_reader.h")
#include <optional>
#include <vector>

#include "backends/cuda/driver_record_reader.h"
#include "backends/emu/sim_backend.h"
#include "core/engine.h"
#include "policies/demand/demand.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::cuda {
namespace {

using testing::ProgramBuilder;
using Cause = UnifiedMemoryRecord::Cause;

// An engine whose block 0 the device holds whole, as the driver reported.
class DriverRecordReaderTest : public ::testing::Test {
 protected:
  DriverRecordReaderTest()
      : backend_(testing::TestDevice(), 4),
        engine_(backend_, policy_, 4, EngineConfigFor(testing::TestDevice())) {
    engine_.OnDevicePagesArrived(block_, FullPageMask());
  }

  // Reads one device-to-host record of `bytes` from `offset` in block 0.
  void ReadDeviceToHost(bool driver_evicts, Cause cause, uint64_t offset, uint64_t bytes) {
    DriverRecordReader reader(driver_evicts,
                              [](uint64_t address) -> std::optional<uint64_t> { return address; });
    std::vector<UnifiedMemoryRecord> records = {UnifiedMemoryRecord{
        UnifiedMemoryRecord::Kind::kBytesDeviceToHost, cause,
        ProgramBuilder::BlockAddress(0) + offset, bytes, 1, 2}};
    FaultBuffer faults(16);
    reader.Read(records, engine_, faults, 0, 0, nullptr);
  }

  PageMask Resident() const { return engine_.memory_state().Find(block_)->resident; }
  bool HasFrame() const { return engine_.memory_state().Find(block_)->has_frame; }

  const BlockNumber block_ = BlockOfAddress(ProgramBuilder::BlockAddress(0));
  SimBackend backend_;
  DemandPolicy policy_;
  Engine engine_;
};

TEST_F(DriverRecordReaderTest, ACpuTouchTakesBackOnlyThePagesItMoved) {
  for (const bool driver_evicts : {true, false}) {
    SCOPED_TRACE(driver_evicts ? "memory=driver" : "memory=engine");
    engine_.OnDevicePagesArrived(block_, FullPageMask());
    ReadDeviceToHost(driver_evicts, Cause::kCoherence, 4 * kPageSize, 16 * kPageSize);
    EXPECT_EQ(Resident(), ~PageRangeMask(4, 16));
    EXPECT_TRUE(HasFrame());
  }
}

TEST_F(DriverRecordReaderTest, ADriverEvictionTakesTheWholeBlockUnderTheBalloonOnly) {
  ReadDeviceToHost(/*driver_evicts=*/false, Cause::kEviction, 0, 16 * kPageSize);
  EXPECT_TRUE(Resident().all());
  ReadDeviceToHost(/*driver_evicts=*/true, Cause::kEviction, 0, 16 * kPageSize);
  EXPECT_FALSE(HasFrame());
  EXPECT_TRUE(Resident().none());
}

TEST_F(DriverRecordReaderTest, TheEnginesOwnEvictionsAreNotAppliedTwice) {
  ReadDeviceToHost(/*driver_evicts=*/true, Cause::kUser, 0, kBlockSize);
  EXPECT_TRUE(Resident().all());
}

TEST_F(DriverRecordReaderTest, TrafficIsSplitIntoTheEnginesCallsAndTheDriversOwn) {
  DriverRecordReader reader(/*driver_evicts=*/true,
                            [](uint64_t address) -> std::optional<uint64_t> { return address; });
  using Kind = UnifiedMemoryRecord::Kind;
  const uint64_t base = ProgramBuilder::BlockAddress(1);
  std::vector<UnifiedMemoryRecord> records = {
      {Kind::kBytesHostToDevice, Cause::kUser, base, kBlockSize, 1, 2},
      {Kind::kBytesHostToDevice, Cause::kCoherence, base + kBlockSize, 8 * kPageSize, 3, 4},
      {Kind::kBytesHostToDevice, Cause::kPrefetch, base + kBlockSize, 24 * kPageSize, 5, 6},
      {Kind::kBytesDeviceToHost, Cause::kUser, base + 2 * kBlockSize, 4 * kPageSize, 7, 8},
      {Kind::kBytesDeviceToHost, Cause::kEviction, base + 3 * kBlockSize, kBlockSize, 9, 10},
  };
  FaultBuffer faults(1024);
  reader.Read(records, engine_, faults, 0, 0, nullptr);
  RunStats stats;
  reader.FillStatistics(stats);
  EXPECT_EQ(stats.h2d_bytes, kBlockSize + 32 * kPageSize);
  EXPECT_EQ(stats.call_h2d_bytes, kBlockSize);
  EXPECT_EQ(stats.d2h_bytes, kBlockSize + 4 * kPageSize);
  EXPECT_EQ(stats.call_d2h_bytes, 4 * kPageSize);
}

TEST_F(DriverRecordReaderTest, APageArrivingTwiceWithoutLeavingLeftUnrecorded) {
  DriverRecordReader reader(/*driver_evicts=*/true,
                            [](uint64_t address) -> std::optional<uint64_t> { return address; });
  using Kind = UnifiedMemoryRecord::Kind;
  const uint64_t first = ProgramBuilder::BlockAddress(1);
  const uint64_t second = ProgramBuilder::BlockAddress(2);
  FaultBuffer faults(4096);
  auto read = [&](std::vector<UnifiedMemoryRecord> records) {
    reader.Read(records, engine_, faults, 0, 0, nullptr);
  };
  // Block 1 arrives whole, then its first 16 pages arrive again with no
  // record of leaving. Block 2 arrives, leaves and arrives again, but the
  // record of its leaving comes in a later batch than its return.
  read({{Kind::kBytesHostToDevice, Cause::kCoherence, first, kBlockSize, 10, 11},
        {Kind::kBytesHostToDevice, Cause::kPrefetch, first, 16 * kPageSize, 50, 51},
        {Kind::kBytesHostToDevice, Cause::kUser, second, kBlockSize, 20, 21},
        {Kind::kBytesHostToDevice, Cause::kCoherence, second, kBlockSize, 40, 41}});
  read({{Kind::kBytesDeviceToHost, Cause::kEviction, second, kBlockSize, 30, 31}});
  RunStats stats;
  reader.FillStatistics(stats);
  EXPECT_EQ(stats.unrecorded_d2h_bytes, 16 * kPageSize);
  EXPECT_EQ(stats.d2h_bytes, kBlockSize);  // what CUPTI recorded, nothing added
}

// The driver's copy into a block the engine holds in part fills the rest:
// the engine hears of the whole block. Into a block it holds whole, or one
// its own transfer is bringing in, the copy is no news.
TEST_F(DriverRecordReaderTest, ACopyIsNewsOnlyWhereTheBooksLackPagesOfTheBlock) {
  DriverRecordReader reader(/*driver_evicts=*/true,
                            [](uint64_t address) -> std::optional<uint64_t> { return address; });
  using Kind = UnifiedMemoryRecord::Kind;
  const uint64_t address = ProgramBuilder::BlockAddress(0);
  FaultBuffer faults(4096);
  auto copy_in = [&] {
    std::vector<UnifiedMemoryRecord> records = {
        {Kind::kBytesHostToDevice, Cause::kCoherence, address, 16 * kPageSize, 10, 11}};
    reader.Read(records, engine_, faults, 0, 0, nullptr);
  };
  copy_in();  // block 0 is whole in the books (the fixture)
  EXPECT_TRUE(faults.empty());
  engine_.OnDevicePagesEvicted(block_, PageRangeMask(0, 16));
  ASSERT_TRUE(HasFrame());
  copy_in();
  EXPECT_EQ(faults.size(), static_cast<size_t>(kPagesPerBlock));
}

// A populate's fault record comes through CUPTI, late; the driver's own
// queue may have told of the block's eviction before it. Such an arrival is
// over and the engine does not take the block for resident; a fault after
// the eviction is a new arrival.
TEST_F(DriverRecordReaderTest, AFaultRecordOlderThanItsBlocksEvictionIsOver) {
  DriverRecordReader reader(/*driver_evicts=*/true,
                            [](uint64_t address) -> std::optional<uint64_t> { return address; });
  using Kind = UnifiedMemoryRecord::Kind;
  const uint64_t address = ProgramBuilder::BlockAddress(1);
  const BlockNumber block = BlockOfAddress(address);
  FaultBuffer faults(4096);
  std::vector<UnifiedMemoryRecord> eviction = {
      {Kind::kBytesDeviceToHost, Cause::kEviction, address, kBlockSize, 30, 31}};
  reader.Read(eviction, engine_, faults, 0, 0, nullptr);
  std::vector<UnifiedMemoryRecord> populate = {
      {Kind::kGpuPageFault, Cause::kUnknown, address, 1, 20, 25}};
  EXPECT_EQ(reader.Read(populate, engine_, faults, 0, 0, nullptr), 0u);
  EXPECT_TRUE(faults.empty());
  std::vector<UnifiedMemoryRecord> refault = {
      {Kind::kGpuPageFault, Cause::kUnknown, address, 1, 40, 45}};
  EXPECT_EQ(reader.Read(refault, engine_, faults, 0, 0, nullptr), 1u);
  EXPECT_EQ(faults.size(), static_cast<size_t>(kPagesPerBlock));
  FaultEntry first;
  faults.Fetch(absl::MakeSpan(&first, 1));
  EXPECT_EQ(BlockOfPage(first.page), block);
  RunStats stats;
  reader.FillStatistics(stats);
  EXPECT_EQ(stats.fault_records, 2u);  // both count as CUPTI's
}

// With faults heard from the driver's queue, each fault event names its
// block and CUPTI's fault records are counted but tell the engine nothing;
// without, the events are counted only. A fault and the eviction of its
// block read together leave the block gone, whatever their order in the
// read, unless the block faulted again after.
TEST_F(DriverRecordReaderTest, FaultEventsTellTheEngineWhereTheyAreHeard) {
  using Kind = UnifiedMemoryRecord::Kind;
  const uint64_t first = ProgramBuilder::BlockAddress(1);
  const uint64_t second = ProgramBuilder::BlockAddress(2);
  const uint64_t third = ProgramBuilder::BlockAddress(3);
  const uint64_t fourth = ProgramBuilder::BlockAddress(4);
  for (const bool from_events : {false, true}) {
    SCOPED_TRACE(from_events ? "fault_records=uvm" : "fault_records=cupti");
    DriverRecordReader reader(/*driver_evicts=*/true,
                              [](uint64_t address) -> std::optional<uint64_t> { return address; });
    reader.HearFaultsFromEvents(from_events);
    FaultBuffer faults(5 * kPagesPerBlock);
    std::vector<UnifiedMemoryRecord> records = {
        {Kind::kGpuPageFault, Cause::kUnknown, first, 3, 10, 12},
        {Kind::kFaultEvent, Cause::kUnknown, first + kPageSize, 1, 11, 0},
        {Kind::kFaultEvent, Cause::kUnknown, second, 1, 12, 0},
        {Kind::kFaultEvent, Cause::kUnknown, second + 2 * kPageSize, 1, 13, 0},
        {Kind::kFaultEvent, Cause::kUnknown, third, 1, 14, 0},
        {Kind::kBytesDeviceToHost, Cause::kEviction, third, kBlockSize, 15, 16},
        {Kind::kFaultEvent, Cause::kUnknown, fourth, 1, 20, 0},
        {Kind::kBytesDeviceToHost, Cause::kEviction, fourth, kBlockSize, 21, 22},
        {Kind::kFaultEvent, Cause::kUnknown, fourth, 1, 23, 0}};
    const uint64_t arriving = reader.Read(records, engine_, faults, 0, 0, nullptr);
    std::vector<FaultEntry> taken(faults.size());
    faults.Fetch(absl::MakeSpan(taken));
    std::vector<BlockNumber> blocks;
    for (const FaultEntry& fault : taken) {
      if (blocks.empty() || blocks.back() != BlockOfPage(fault.page)) {
        blocks.push_back(BlockOfPage(fault.page));
      }
    }
    if (from_events) {
      // Every faulted block once, in fault order; the third left in the
      // same read, the fourth left and came back.
      EXPECT_EQ(blocks, (std::vector<BlockNumber>{BlockOfAddress(first), BlockOfAddress(second),
                                                  BlockOfAddress(fourth)}));
      EXPECT_EQ(arriving, 3u);
    } else {
      EXPECT_EQ(blocks, std::vector<BlockNumber>{BlockOfAddress(first)});
      EXPECT_EQ(arriving, 1u);
    }
    RunStats stats;
    reader.FillStatistics(stats);
    EXPECT_EQ(stats.fault_records, 1u);
    EXPECT_EQ(stats.faults, 3u);
    EXPECT_EQ(stats.fault_events, 6u);
  }
}

}  // namespace
}  // namespace umlab::cuda

#else
TEST(DriverRecordReader, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
}
#endif
