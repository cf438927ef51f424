// The reader's side of the UVM driver's event ring, fed as the driver feeds
// it: events written at the offsets of uvm_types.h, then the put index
// moved past them. Host code only: it runs wherever the cuda backend is
// built.
#include <gtest/gtest.h>

#if __has_include("backends/cuda/uvm_event_ring.h")
#include <cstring>
#include <vector>

#include "backends/cuda/uvm_event_ring.h"

namespace umlab::cuda {
namespace {

constexpr uint32_t kEntries = 4;

class UvmEventRingTest : public ::testing::Test {
 protected:
  // Writes one event into the next slot as the driver does, field by field
  // at UvmEventMigrationInfo_V2's offsets.
  void Write(uint8_t type, uint8_t cause, uint16_t source, uint16_t destination,
             uint64_t address, uint64_t bytes, uint64_t begin_gpu, uint64_t end_gpu) {
    unsigned char* slot = NextSlot(type);
    slot[1] = cause;
    std::memcpy(slot + 4, &source, 2);
    std::memcpy(slot + 6, &destination, 2);
    std::memcpy(slot + 16, &address, 8);
    std::memcpy(slot + 24, &bytes, 8);
    std::memcpy(slot + 56, &begin_gpu, 8);
    std::memcpy(slot + 64, &end_gpu, 8);
    Publish();
  }

  // Writes one GPU fault event at UvmEventGpuFaultInfo_V2's offsets.
  void WriteFault(uint16_t gpu, uint64_t address, uint64_t service_cpu, uint64_t written_gpu,
                  uint32_t batch) {
    unsigned char* slot = NextSlot(kUvmGpuFaultEvent);
    std::memcpy(slot + 2, &gpu, 2);
    std::memcpy(slot + 8, &address, 8);
    std::memcpy(slot + 16, &service_cpu, 8);
    std::memcpy(slot + 24, &written_gpu, 8);
    std::memcpy(slot + 32, &batch, 4);
    Publish();
  }

  // The next slot, cleared, with its event type.
  unsigned char* NextSlot(uint8_t type) {
    unsigned char* slot = events_.data() + size_t{put_} * kUvmEventBytes;
    std::memset(slot, 0, kUvmEventBytes);
    slot[0] = type;
    return slot;
  }
  // Moves the driver's put index past the slot written.
  void Publish() {
    put_ = (put_ + 1) % kEntries;
    control_.put_ahead = control_.put_behind = put_;
  }

  std::vector<unsigned char> events_ = std::vector<unsigned char>(kEntries * kUvmEventBytes);
  UvmEventControl control_ = {};
  uint32_t put_ = 0;
  UvmEventRing ring_{events_.data(), kEntries, &control_};
};

TEST_F(UvmEventRingTest, MigrationsBecomeTransferRecordsOnTheRecordsClock) {
  Write(kUvmMigrationEvent, 2, /*source=*/0, /*destination=*/1, 0x7f0000200000, 8192, 1000, 1500);
  Write(kUvmMigrationEvent, 1, 1, 0, 0x7f0000400000, 2 << 20, 2000, 2600);
  std::vector<UnifiedMemoryRecord> records;
  ring_.Drain(records, /*gpu_to_records_ns=*/100);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, UnifiedMemoryRecord::Kind::kBytesHostToDevice);
  EXPECT_EQ(records[0].cause, UnifiedMemoryRecord::Cause::kCoherence);
  EXPECT_EQ(records[0].address, 0x7f0000200000u);
  EXPECT_EQ(records[0].value, 8192u);
  EXPECT_EQ(records[0].start_ns, 1100u);
  EXPECT_EQ(records[0].end_ns, 1600u);
  EXPECT_EQ(records[1].kind, UnifiedMemoryRecord::Kind::kBytesDeviceToHost);
  EXPECT_EQ(records[1].cause, UnifiedMemoryRecord::Cause::kUser);
  EXPECT_EQ(records[1].value, uint64_t{2} << 20);
  // The driver sees the room given back.
  EXPECT_EQ(control_.get_behind, 2u);
  EXPECT_EQ(control_.get_ahead, 2u);
}

TEST_F(UvmEventRingTest, ReadsAcrossTheEndOfTheRingAndPassesOverOtherEvents) {
  Write(kUvmMigrationEvent, 2, 0, 1, 0x1000, 4096, 10, 20);
  Write(kUvmMigrationEvent, 3, 0, 1, 0x2000, 4096, 30, 40);
  Write(kUvmMigrationEvent, 4, 1, 0, 0x3000, 4096, 50, 60);
  std::vector<UnifiedMemoryRecord> records;
  ring_.Drain(records, 0);
  ASSERT_EQ(records.size(), 3u);
  // Slots 3, 0 and 1: the ring wraps.
  Write(4 /*UvmEventTypeGpuFaultReplay*/, 0, 0, 0, 0x4000, 0, 70, 0);
  Write(kUvmMigrationEvent, 2, 0, 1, 0x5000, 4096, 80, 90);
  Write(kUvmMigrationEvent, 2, 1, 2, 0x6000, 4096, 100, 110);
  records.clear();
  ring_.Drain(records, 0);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].address, 0x5000u);
  EXPECT_EQ(records[1].kind, UnifiedMemoryRecord::Kind::kBytesDeviceToDevice);
  EXPECT_EQ(control_.get_behind, 2u);
  // Nothing new: nothing read.
  records.clear();
  ring_.Drain(records, 0);
  EXPECT_TRUE(records.empty());
}

// A fault event names the faulting address and is stamped when the GPU
// wrote the fault, on the migrations' clock.
TEST_F(UvmEventRingTest, GpuFaultsBecomeFaultEventsStampedWhenTheGpuRaisedThem) {
  WriteFault(/*gpu=*/1, 0x7f0000201000, /*service_cpu=*/99999, /*written_gpu=*/5000, 17);
  Write(kUvmMigrationEvent, 2, 0, 1, 0x7f0000200000, 2 << 20, 5200, 5400);
  std::vector<UnifiedMemoryRecord> records;
  ring_.Drain(records, /*gpu_to_records_ns=*/100);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].kind, UnifiedMemoryRecord::Kind::kFaultEvent);
  EXPECT_EQ(records[0].address, 0x7f0000201000u);
  EXPECT_EQ(records[0].value, 1u);
  EXPECT_EQ(records[0].start_ns, 5100u);
  EXPECT_EQ(records[0].end_ns, 0u);
  EXPECT_EQ(records[0].source, 1u);
  EXPECT_EQ(records[0].batch, 17u);
  EXPECT_EQ(records[1].kind, UnifiedMemoryRecord::Kind::kBytesHostToDevice);
  EXPECT_STREQ(KindName(records[0].kind), "fault_event");
}

TEST_F(UvmEventRingTest, TheDriversDropCountsForMigrationsAndFaultsAreReadBack) {
  control_.dropped[kUvmMigrationEvent] = 7;
  control_.dropped[kUvmGpuFaultEvent] = 100;
  control_.dropped[4] = 1000;  // replays: not read
  EXPECT_EQ(ring_.dropped_events(), 107u);
}

}  // namespace
}  // namespace umlab::cuda

#else
TEST(UvmEventRing, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
}
#endif
