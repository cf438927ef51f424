// How a fault reaches the driver on the sim (DeviceConfig's fault path, as
// the h200 preset measures it): the GPU writes entries one at a time, the
// driver wakes some time after the first, and its flush before a replay
// keeps the entries written since it fetched the batch.
#include <gtest/gtest.h>

#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

struct FaultPath {
  DeviceConfig::ReplayFlush flush;
  Nanos write_ns;
  Nanos wake_ns;
};

// Four blocks read by one kernel on four SMs, in order, under a policy that
// brings a whole block in on its first fault: first touches, so the driver
// zero-fills them, each batch taking its latency, 10 us. The SMs' faults
// are written `write_ns` apart.
SimRun FourBlocks(const FaultPath& path) {
  DeviceConfig device = TestDevice(4);
  device.fault_latency_ns = 10000;
  device.replay_flush = path.flush;
  device.fault_write_ns = path.write_ns;
  device.fault_wake_ns = path.wake_ns;
  return FourBlocksWholeOnFirstFault(device);
}

TEST(SimFaultPathTest, TheDriversFlushKeepsTheFaultsWrittenWhileItServed) {
  // Each block: the four SMs fault on its first pages at once; the driver
  // fetches the one entry written by then and brings the block in while
  // the other three are written. Flushing everything before the replay
  // drops them (the SMs find the block when they retry); the driver's flush
  // keeps them for a batch of its own, of faults already served. So every
  // SM's first fault on every block is fetched only under the driver's.
  const SimRun all = FourBlocks({DeviceConfig::ReplayFlush::kAll, 1000, 0});
  const SimRun driver = FourBlocks({DeviceConfig::ReplayFlush::kDriver, 1000, 0});
  ASSERT_TRUE(all.status.ok()) << all.status;
  ASSERT_TRUE(driver.status.ok()) << driver.status;
  EXPECT_LT(all.stats.faults, 16u);
  EXPECT_GE(driver.stats.faults, 16u);
  EXPECT_GT(driver.stats.fault_batches, all.stats.fault_batches);
  EXPECT_EQ(all.stats.faulted_blocks, 4u);
  EXPECT_EQ(driver.stats.faulted_blocks, 4u);
  EXPECT_EQ(driver.stats.h2d_bytes, all.stats.h2d_bytes);
}

TEST(SimFaultPathTest, TheDriverWakesToABatchOfWhatTheGpuWroteMeanwhile) {
  // Woken 3.5 us after the first entry, the driver finds all four written
  // (at 0, 1, 2 and 3 us): one batch a block again, and 3.5 us later.
  const SimRun at_once = FourBlocks({DeviceConfig::ReplayFlush::kDriver, 1000, 0});
  const SimRun woken = FourBlocks({DeviceConfig::ReplayFlush::kDriver, 1000, 3500});
  ASSERT_TRUE(woken.status.ok()) << woken.status;
  EXPECT_EQ(woken.stats.fault_batches, 4u);
  EXPECT_EQ(woken.stats.faults, 16u);
  EXPECT_GT(woken.stats.time_ns, 0u);
  EXPECT_LT(woken.stats.time_ns, at_once.stats.time_ns);
}

}  // namespace
}  // namespace umlab::testing
