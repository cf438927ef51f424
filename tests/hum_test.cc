// HUM's hidden copies on the sim (policies/hum, backends/emu/copy_stream.h):
// the host goes on at once, threads stage the data 2 MB at a time, one
// migration thread lands it, kernels launch early and wait on the pages
// still to come, and a host write to a source waits for its copy. Times are
// worked out on the test device: 1 GB/s each way and 1 GB/s per staging
// thread with no contention, no fixed costs, so a 2 MiB chunk takes
// 2.097152 ms to stage and as long to land.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "backends/emu/copy_stream.h"
#include "policies/hum/hum.h"
#include "policies/memcpy/memcpy.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kChunk = 2097152;  // 2 MiB at 1 GB/s: staged, or landed
constexpr uint64_t kHost = 0x700000000000ull;
uint64_t HostBuffer(int index) { return kHost + uint64_t(index) * kBlockSize; }
uint64_t DeviceBlock(int block) { return ProgramBuilder::BlockAddress(block); }
constexpr CopyDirection kToDevice = CopyDirection::kHostToDevice;

DeviceConfig HumDevice() {
  DeviceConfig device = TestDevice();
  device.host_stage_bytes_per_second = 1e9;
  device.host_stage_contention = 0;
  return device;
}

void HostWork(ProgramBuilder& p, uint32_t exec_id, Nanos compute_ns, int buffer, bool write) {
  p.OnHost(exec_id).Begin(exec_id, compute_ns).Access(HostBuffer(buffer), kBlockSize, write);
  p.End(exec_id);
}

// When each block's migrations landed, in order, and when kernels ended.
class Landings final : public EngineObserver {
 public:
  void OnTransferCompleted(const Transfer& transfer, Nanos now) override {
    if (transfer.kind != TransferKind::kEviction) landed.push_back({transfer.block, now});
  }
  void OnKernelEnd(uint32_t exec_id, Nanos now) override { kernel_ends[exec_id] = now; }
  std::vector<std::pair<BlockNumber, Nanos>> landed;
  std::map<uint32_t, Nanos> kernel_ends;
};

BlockNumber Block(int block) { return BlockOfAddress(DeviceBlock(block)); }

TEST(HumTest, AHiddenCopyReturnsAtOnceAndHidesBehindHostWork) {
  // One 2 MiB copy, 5 ms of host work, a 10 us kernel on the copy. The copy
  // is staged by 2.1 ms and landed by 4.2 ms, while the host works: the
  // kernel finds its pages there. memcpy would take the 2.1 ms first.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  HostWork(p, 1, 5000 * kUs, 1, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  HumPolicy hum(1, true);
  const SimRun run = RunOnSim(p, 4, hum, HumDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, 5010 * kUs);
  EXPECT_EQ(run.stats.copy_wait_ns, 0);
  EXPECT_EQ(run.stats.hidden_copy_bytes, kBlockSize);
  EXPECT_EQ(run.stats.prefetch_bytes, kBlockSize);
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);

  MemcpyPolicy memcpy;
  const SimRun plain = RunOnSim(p, 4, memcpy, HumDevice());
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  EXPECT_EQ(plain.stats.time_ns, kChunk + 5010 * kUs);
}

TEST(HumTest, AKernelLaunchedEarlyWaitsForThePagesItsCopyHasYetToLand) {
  // The blank-page race, shown impossible: the kernel launches at 1 ms,
  // long before the copy lands (4.2 ms). Its first accesses fault on pages
  // the copy has yet to bring, and wait for the copy rather than being
  // given blank pages: nothing is zero-filled, and the sim's referee (every
  // kernel begin, every page mapped while a kernel runs) finds no page
  // mapped before its copy landed. The kernel ends 10 us after the landing.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  HostWork(p, 1, 1000 * kUs, 1, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  HumPolicy hum(1, true);
  Landings landings;
  const SimRun run =
      RunOnSim(p, 4, hum, HumDevice(), ReplayPolicy::kBatch, SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.early_launches, 1u);
  EXPECT_EQ(run.stats.faulted_awaiting_copy_pages, 4u);  // one per SM
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);
  ASSERT_EQ(landings.landed.size(), 1u);
  EXPECT_EQ(landings.landed[0].second, 2 * kChunk);
  EXPECT_EQ(run.stats.time_ns, 2 * kChunk + 10 * kUs);
}

TEST(HumTest, AKernelThatDoesNotDependOnTheCopyBeforeItWaitsForIt) {
  // The kernel touches block 1, not the copy's block 0: the thesis's first
  // condition fails, so it waits for the copy, staged and landed (4.2 ms).
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  p.Kernel(1, 10 * kUs, {1});
  HumPolicy hum(1, true);
  const SimRun run = RunOnSim(p, 4, hum, HumDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.early_launches, 0u);
  EXPECT_GE(run.stats.time_ns, 2 * kChunk + 10 * kUs);
  EXPECT_EQ(run.stats.copy_wait_ns, 2 * kChunk);
}

// Copies A (blocks 0-1) and B (blocks 2-3), async, then a kernel on both.
ProgramBuilder TwoCopiesAndAKernel() {
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), 2 * kBlockSize, /*async=*/true);
  p.Copy(kToDevice, DeviceBlock(2), HostBuffer(2), 2 * kBlockSize, /*async=*/true);
  p.Kernel(1, 10 * kUs, {0, 1, 2, 3});
  return p;
}

TEST(HumTest, TheMigrationThreadServesTheCopiesQueuesRoundRobin) {
  // Four threads stage all four chunks by 2.1 ms; the migration thread then
  // lands A0, B0, A1, B1, one every 2.1 ms. The kernel, after B, launches
  // at once (B started, its pages off the device) and works through each
  // block as it lands: after the last landing, a quarter of its 10 us is
  // left.
  HumPolicy hum(4, true);
  Landings landings;
  const SimRun run = RunOnSim(TwoCopiesAndAKernel(), 8, hum, HumDevice(), ReplayPolicy::kBatch,
                              SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::vector<std::pair<BlockNumber, Nanos>> expected = {
      {Block(0), 2 * kChunk}, {Block(2), 3 * kChunk}, {Block(1), 4 * kChunk},
      {Block(3), 5 * kChunk}};
  EXPECT_EQ(landings.landed, expected);
  EXPECT_EQ(run.stats.early_launches, 1u);
  EXPECT_EQ(run.stats.time_ns, 5 * kChunk + 10 * kUs / 4);
}

TEST(HumTest, UnscheduledCopiesRunOneAfterAnother) {
  // sched=false (HUM-no-sched): B starts only once A has landed (at 6.3
  // ms), is staged by 8.4 ms and lands its chunks at 10.5 and 12.6 ms. The
  // kernel launches once B has started, and has its last block's quarter
  // of 10 us left when that lands.
  HumPolicy hum(4, false);
  Landings landings;
  const SimRun run = RunOnSim(TwoCopiesAndAKernel(), 8, hum, HumDevice(), ReplayPolicy::kBatch,
                              SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const std::vector<std::pair<BlockNumber, Nanos>> expected = {
      {Block(0), 2 * kChunk}, {Block(1), 3 * kChunk}, {Block(2), 5 * kChunk},
      {Block(3), 6 * kChunk}};
  EXPECT_EQ(landings.landed, expected);
  EXPECT_EQ(run.stats.early_launches, 1u);
  EXPECT_EQ(run.stats.time_ns, 6 * kChunk + 10 * kUs / 4);
}

TEST(HumTest, StagingThreadsSlowEachOtherByTheirContention) {
  // Eight chunks, eight threads, contention 1/7: each thread stages at
  // 1 / (1 + 7/7) = 0.5 GB/s, so all eight are staged at 4.2 ms, and the
  // first lands 2.1 ms later.
  ProgramBuilder p;
  p.Alloc(0, 8);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), 8 * kBlockSize, /*async=*/true);
  DeviceConfig device = HumDevice();
  device.host_stage_contention = 1.0 / 7;
  HumPolicy hum(8, true);
  Landings landings;
  const SimRun run =
      RunOnSim(p, 8, hum, device, ReplayPolicy::kBatch, SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(landings.landed.size(), 8u);
  EXPECT_EQ(landings.landed.front().second, 3 * kChunk);
  EXPECT_EQ(landings.landed.back().second, 10 * kChunk);
  EXPECT_EQ(run.stats.time_ns, 10 * kChunk);  // the program's end waits for its copies
}

TEST(HumTest, AHostWriteToTheSourceWaitsUntilItsCopyHasLanded) {
  // The source is write-protected until the copy lands (4.2 ms); the host
  // then writes it for 100 us. A read of it waits for nothing.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  HostWork(p, 1, 100 * kUs, 0, /*write=*/true);
  HumPolicy hum(1, true);
  const SimRun run = RunOnSim(p, 4, hum, HumDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.copy_wait_ns, 2 * kChunk);
  EXPECT_EQ(run.stats.time_ns, 2 * kChunk + 100 * kUs);

  ProgramBuilder reads;
  reads.Alloc(0, 1);
  reads.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  HostWork(reads, 1, 100 * kUs, 0, /*write=*/false);
  HumPolicy again(1, true);
  const SimRun read_run = RunOnSim(reads, 4, again, HumDevice());
  ASSERT_TRUE(read_run.status.ok()) << read_run.status;
  EXPECT_EQ(read_run.stats.copy_wait_ns, 0);
}

TEST(HumTest, TheDestinationLeavesTheDeviceBeforeItsCopyIsStaged) {
  // Kernel 1 writes block 0 (zero-filled on the device, dirty). The copy
  // into it first takes the block off the device (its write-back, 2.1 ms),
  // then stages (to 4.2 ms) and lands (6.3 ms). Kernel 2 reads the block:
  // it may go early only once the block has left the device, and ends 10 us
  // after the landing.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize);
  p.Kernel(2, 10 * kUs, {0});
  HumPolicy hum(1, true);
  Landings landings;
  const SimRun run =
      RunOnSim(p, 4, hum, HumDevice(), ReplayPolicy::kBatch, SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.early_launches, 1u);
  EXPECT_EQ(run.stats.hidden_copy_bytes, kBlockSize);
  const Nanos copy_issued = landings.kernel_ends.at(1);
  ASSERT_FALSE(landings.landed.empty());
  EXPECT_EQ(landings.landed.back(), std::make_pair(Block(0), copy_issued + 3 * kChunk));
  EXPECT_EQ(run.stats.time_ns, copy_issued + 3 * kChunk + 10 * kUs);
}

TEST(HumTest, ACopyWaitsForOneUnderWayThatWritesTheSameDestination) {
  // Two async copies into block 0: the second starts when the first has
  // landed (4.2 ms), and lands at 8.4 ms.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(0), kBlockSize, true);
  p.Copy(kToDevice, DeviceBlock(0), HostBuffer(1), kBlockSize, true);
  HumPolicy hum(4, true);
  Landings landings;
  const SimRun run =
      RunOnSim(p, 4, hum, HumDevice(), ReplayPolicy::kBatch, SimOptions{}, &landings);
  ASSERT_TRUE(run.status.ok()) << run.status;
  // The second copy's start takes the first one's block off the device
  // (clean: the host still holds its data), so it lands again.
  const std::vector<std::pair<BlockNumber, Nanos>> expected = {{Block(0), 2 * kChunk},
                                                               {Block(0), 4 * kChunk}};
  EXPECT_EQ(landings.landed, expected);
}

TEST(HumTest, TheRefereeFindsAPageMappedBeforeItsCopyLands) {
  // The check the sim runs at every kernel begin, on a device that maps a
  // page whose copy has not landed (what a migration on a fault would do).
  const DeviceConfig device = HumDevice();
  SimBackend backend(device, 4);
  HumPolicy hum(1, true);
  Engine engine(backend, hum, 4, EngineConfigFor(device));
  PcieLink link(device.link);
  CopyStream copies(device, link);
  copies.Bind(&engine);
  ASSERT_TRUE(copies
                  .Issue(0, CopyCommand{kToDevice, false, DeviceBlock(0), kHost, kBlockSize},
                         CopyMode::kHidden, 0)
                  .ok());
  DeviceMemory memory(4);
  EXPECT_TRUE(copies.CheckNoBlankPages(memory).ok());
  ASSERT_TRUE(memory.Map(Block(0), PageRangeMask(0, 1), PageMask()).ok());
  EXPECT_THAT(copies.CheckNoBlankPages(memory).message(), ::testing::HasSubstr("blank page"));
}

TEST(HumTest, DeviceToHostCopiesAreCudasOwn) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.Copy(CopyDirection::kDeviceToHost, DeviceBlock(0), HostBuffer(0), kBlockSize);
  HumPolicy hum(8, true);
  const SimRun run = RunOnSim(p, 4, hum, HumDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.dma_d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.hidden_copy_bytes, 0u);
}

}  // namespace
}  // namespace umlab::testing
