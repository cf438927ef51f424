// Remote mapping on the sim (PolicyContext::MapRemote): a remotely mapped
// page never faults and takes no frame; every access moves the bytes it
// touches over the link at the remote rates, on the lanes migrations use.
// Times are worked out on the test device: 1 GB/s each way, no fixed
// costs, so a 4 KiB page crosses in 4.096 us and a block in 2.097152 ms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/tensor_role.h"
#include "policies/demand/demand.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kBlockMove = 2097152;  // 2 MiB at 1 GB/s

BlockNumber Block(int block) { return BlockOfAddress(ProgramBuilder::BlockAddress(block)); }

// The test device with no round trip on a remote access, so a kernel that
// streams remote pages is bound by the link alone.
DeviceConfig RemoteDevice() {
  DeviceConfig device = TestDevice();
  device.link.remote_latency_ns = 0;
  return device;
}

Nanos KernelOverhead(const DeviceConfig& device) {
  return device.kernel_launch_ns + device.kernel_grid_ns;
}

TEST(SimRemoteMapTest, ARemoteBlockIsReadOverTheLinkWithoutFaultsOrFrames) {
  // Kernel 1 reads block 0, mapped remotely at its start: no fault, no
  // copy, no frame; its 512 pages cross the host-to-device lane one after
  // another, so the kernel lasts as long as the block's bytes take.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const DeviceConfig device = RemoteDevice();
  const SimRun run = RunOnSim(p, 1, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.peak_used_frames, 0u);
  EXPECT_EQ(run.stats.remote_mapped_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_write_bytes, 0u);
  EXPECT_EQ(run.stats.page_accesses, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.stats.time_ns, kBlockMove + KernelOverhead(device));
}

TEST(SimRemoteMapTest, TheRemoteRatesAndRoundTripAreTheirOwn) {
  // Remote reads at 4 GB/s (the DMA link stays at 1 GB/s): the block takes
  // a quarter as long; a 1 us round trip adds 1 us to the last access only,
  // the others being in flight behind it.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  DeviceConfig device = RemoteDevice();
  device.link.remote_read_bytes_per_second = 4e9;
  device.link.remote_latency_ns = kUs;
  const SimRun run = RunOnSim(p, 1, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, kBlockMove / 4 + kUs + KernelOverhead(device));
}

TEST(SimRemoteMapTest, AnAccessMovesOnlyTheBytesItTouches) {
  // 100 bytes read at offset 10 of a remote page, 3 bytes written across a
  // page boundary: only those bytes cross the link.
  ProgramBuilder p;
  p.Alloc(0, 1);
  const uint64_t base = ProgramBuilder::BlockAddress(0);
  p.Begin(1, 10 * kUs).Access(base + 10, 100, false).End(1);
  p.Begin(2, 10 * kUs).Access(base + 2 * kPageSize - 1, 3, true).End(2);
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const SimRun run = RunOnSim(p, 1, policy, RemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_read_bytes, 100u);
  EXPECT_EQ(run.stats.remote_write_bytes, 3u);
  EXPECT_EQ(run.stats.faults, 0u);
}

TEST(SimRemoteMapTest, EveryPassOverARemoteRangeCrossesTheLink) {
  // A GEMM-like read of block 0 that passes over it four times (three
  // rereads): four blocks' worth of bytes cross, and the kernel lasts as
  // long as they take.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Begin(1, 10 * kUs);
  Event read;
  read.kind = EventKind::kAccess;
  read.address = ProgramBuilder::BlockAddress(0);
  read.size = kBlockSize;
  read.rereads = 3;
  p.Raw(read).End(1);
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const DeviceConfig device = RemoteDevice();
  const SimRun run = RunOnSim(p, 1, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_read_bytes, 4 * kBlockSize);
  EXPECT_EQ(run.stats.time_ns, 4 * kBlockMove + KernelOverhead(device));
}

TEST(SimRemoteMapTest, MapNowMigrateLaterUnmapsFirstAndKeepsTheWrites) {
  // Kernel 1 writes block 0 through a remote mapping (device-to-host lane);
  // kernel 2 (3 ms of compute) prefetches it: the copy replaces the
  // mapping, moves the whole block, and kernel 3's reads then hit on the
  // device.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 3000 * kUs, {});
  p.Kernel(3, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  policy.At(2, [](PolicyContext& c) { c.Prefetch(Block(0), FullPageMask(), 3); });
  const SimRun run = RunOnSim(p, 1, policy, RemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, 0u);
  // The host holds the data written through the mapping: it is copied,
  // not zero-filled.
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.prefetch_bytes, kBlockSize);
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);
  EXPECT_EQ(run.stats.faults, 0u);
}

TEST(SimRemoteMapTest, RemoteAccessesShareTheLaneWithMigrations) {
  // One frame. Kernels 1 and 2 write blocks 1 and 2 (block 1 is written
  // back to make room). Kernel 3 reads block 0 through a remote mapping and
  // block 1, which faults and is copied back in: both cross the one
  // host-to-device lane, so kernel 3 takes at least both blocks' time,
  // where either alone takes one.
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 10 * kUs, {1}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {2}, /*write=*/true);
  p.Kernel(3, 10 * kUs, {0, 1});
  ScriptedMoves policy;
  policy.At(3, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const DeviceConfig device = RemoteDevice();
  const SimRun run = RunOnSim(p, 1, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);  // block 1 back
  EXPECT_GE(run.stats.time_ns, 2 * kBlockMove + 3 * KernelOverhead(device));
}

TEST(SimRemoteMapTest, FaultsAnsweredWithRemoteMappingsMoveNoBlocks) {
  // A policy that maps every faulted page remotely: block 0, written by
  // kernel 1 and evicted by kernel 2's block 1 (one frame), is read back by
  // kernel 3 through mappings made at its faults.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.Kernel(2, 10 * kUs, {1}, /*write=*/true);
  p.Kernel(3, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(3, [&policy](PolicyContext&) { policy.map_faults_remotely = true; });
  const SimRun run = RunOnSim(p, 1, policy, RemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);  // block 0 written back once
  EXPECT_EQ(run.stats.h2d_bytes, 0u);          // never copied in again
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_GT(run.stats.faults, 0u);
}

TEST(SimRemoteMapTest, AFreeTakesTheMappingDown) {
  // Block 0 is mapped remotely, freed and allocated again: the next kernel
  // finds a fresh page on the device (a zero-fill fault), not the host's.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  p.Free(0, 1);
  p.Alloc(0, 1);
  p.Kernel(2, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const SimRun run = RunOnSim(p, 1, policy, RemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
}

TEST(SimRemoteMapTest, PeakDeviceMemoryIsSplitByTensorRole) {
  // A parameter block and two activation blocks are resident together at
  // the peak; a remotely mapped parameter block never counts.
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Activate(ProgramBuilder::BlockAddress(0), kBlockSize, ActivateCause(TensorRole::kParameter));
  p.Activate(ProgramBuilder::BlockAddress(1), 2 * kBlockSize,
             ActivateCause(TensorRole::kActivation));
  p.Activate(ProgramBuilder::BlockAddress(3), kBlockSize, ActivateCause(TensorRole::kParameter));
  p.Kernel(1, 10 * kUs, {0, 1, 2, 3}, /*write=*/true);
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(3), FullPageMask()); });
  const SimRun run = RunOnSim(p, 4, policy, RemoteDevice());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.peak_device_bytes, 3 * kBlockSize);
  const auto& by_role = run.stats.peak_device_bytes_by_role;
  EXPECT_EQ(by_role[static_cast<int>(TensorRole::kParameter)], kBlockSize);
  EXPECT_EQ(by_role[static_cast<int>(TensorRole::kActivation)], 2 * kBlockSize);
  EXPECT_EQ(by_role[static_cast<int>(TensorRole::kGradient)], 0u);
}

TEST(SimRemoteMapTest, TheG10FaultModelRefusesRemoteMappings) {
  SimOptions options;
  options.fault_model = SimOptions::FaultModel::kG10;
  EXPECT_FALSE(SimBackend(TestDevice(), 1, options).MapsRemotely());
  EXPECT_TRUE(SimBackend(TestDevice(), 1).MapsRemotely());
}

}  // namespace
}  // namespace umlab::testing
