#include "emu/pcie_link.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace umlab {
namespace {

constexpr uint64_t k2MiB = 2ull << 20;

// Runs the link until idle; returns each transfer's completion time.
std::map<TransferId, Nanos> Drain(PcieLink& link) {
  std::map<TransferId, Nanos> done;
  std::vector<TransferId> completed;
  while (link.NextEventTime() != kNever) {
    const Nanos now = link.NextEventTime();
    completed.clear();
    link.ProcessEventsAt(now, completed);
    for (TransferId id : completed) done[id] = now;
  }
  return done;
}

LinkTransfer Make(TransferId id, LinkDirection direction, TransferKind priority, uint64_t bytes,
                  Nanos ready = 0, TransferId after = 0) {
  return LinkTransfer{id, direction, priority, bytes, ready, after};
}

TEST(PcieLinkTest, DurationIsLatencyPlusBytesOverBandwidth) {
  PcieLink link(LinkConfig{15.754e9, 15.754e9, 5000});
  // 2 MiB at 15.754 GB/s is 133118.7 ns; plus 5 us.
  EXPECT_EQ(link.Duration(LinkDirection::kHostToDevice, k2MiB), 138119);
  EXPECT_EQ(link.Duration(LinkDirection::kHostToDevice, 0), 5000);
}

TEST(PcieLinkTest, FaultsOvertakeQueuedPrefetchesButDoNotPreempt) {
  PcieLink link(LinkConfig{1e9, 1e9, 0});  // 2 MiB takes 2097152 ns
  const Nanos d = 2097152;
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(3, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB), 0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(1), d);      // already moving: not preempted
  EXPECT_EQ(done.at(3), 2 * d);  // the fault goes next
  EXPECT_EQ(done.at(2), 3 * d);
}

TEST(PcieLinkTest, EvictionsGoBeforePrefetchesOnTheirOwnLane) {
  PcieLink link(LinkConfig{1e9, 1e9, 0});
  const Nanos d = 2097152;
  link.Submit(Make(1, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kDeviceToHost, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(3, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB), 0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(1), d);
  EXPECT_EQ(done.at(3), 2 * d);
  EXPECT_EQ(done.at(2), 3 * d);
}

TEST(PcieLinkTest, DirectionsRunInParallel) {
  PcieLink link(LinkConfig{1e9, 2e9, 0});
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB), 0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(1), 2097152);
  EXPECT_EQ(done.at(2), 1048576);
  EXPECT_EQ(link.bytes_moved(LinkDirection::kHostToDevice), k2MiB);
  EXPECT_EQ(link.bytes_moved(LinkDirection::kDeviceToHost), k2MiB);
}

TEST(PcieLinkTest, EvictionsPayTheDriversOverheadBeforeTheirCopy) {
  LinkConfig config{1e9, 1e9, 1000};
  config.eviction_overhead_ns = 300000;
  PcieLink link(config);
  EXPECT_EQ(link.Duration(LinkDirection::kDeviceToHost, k2MiB), 1000 + 300000 + 2097152);
  EXPECT_EQ(link.Duration(LinkDirection::kHostToDevice, k2MiB), 1000 + 2097152);
}

TEST(PcieLinkTest, TheDriversFaultPathCopiesAtItsOwnRate) {
  LinkConfig config{2e9, 1e9, 1000};
  // Unset, the fault path moves at the link's rate.
  EXPECT_EQ(PcieLink(config).Duration(LinkDirection::kHostToDevice, k2MiB, true, false, false,
                                      /*fault_path=*/true),
            1000 + 1048576);
  config.fault_h2d_bytes_per_second = 0.5e9;
  PcieLink link(config);
  LinkTransfer fault = Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB);
  fault.fault_path = true;
  link.Submit(fault, 0);
  // A policy's call on the same lane keeps the link's rate.
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB), 0);
  // The rate is the fault path's to the device only: write-backs keep theirs.
  LinkTransfer back = Make(3, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB);
  back.fault_path = true;
  back.evicts_for_room = false;
  link.Submit(back, 0);
  const std::map<TransferId, Nanos> done = Drain(link);
  EXPECT_EQ(done.at(1), 1000 + 4194304);
  EXPECT_EQ(done.at(2), 1000 + 4194304 + 1000 + 1048576);
  EXPECT_EQ(done.at(3), 1000 + 2097152);
}

TEST(PcieLinkTest, TheFaultPathPaysItsOverheadPerMigrationZeroFillsIncluded) {
  LinkConfig config{1e9, 1e9, 1000};
  config.fault_block_overhead_ns = 100000;
  PcieLink link(config);
  LinkTransfer copy = Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB);
  copy.fault_path = true;
  link.Submit(copy, 0);
  // A zero-fill: no copy and no transfer set-up, only the overhead, in its
  // turn on the lane.
  LinkTransfer zero_fill =
      Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, 0);
  zero_fill.fault_path = true;
  zero_fill.fault_zero_fill = true;
  link.Submit(zero_fill, 0);
  // A policy's call is not the fault path: no overhead.
  link.Submit(Make(3, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  const std::map<TransferId, Nanos> done = Drain(link);
  EXPECT_EQ(done.at(1), 1000 + 2097152 + 100000);
  EXPECT_EQ(done.at(2), 1000 + 2097152 + 100000 + 100000);
  EXPECT_EQ(done.at(3), 1000 + 2097152 + 100000 + 100000 + 1000 + 2097152);
  // Without an overhead a zero-fill is done at once and holds no lane, as
  // every transfer with nothing to move.
  PcieLink free_fills(LinkConfig{1e9, 1e9, 1000});
  free_fills.Submit(zero_fill, 0);
  EXPECT_EQ(Drain(free_fills).at(2), 0);
}

TEST(PcieLinkTest, APolicysPrefetchCallsMoveBesideTheFaultPathWhenConfigured) {
  for (const bool beside : {false, true}) {
    LinkConfig config{1e9, 1e9, 1000, 0, /*full_duplex=*/false};
    config.prefetch_calls_beside_faults = beside;
    PcieLink link(config);
    LinkTransfer fault =
        Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB);
    fault.fault_path = true;
    link.Submit(fault, 0);
    // As the sim submits them from user space: one order, no priorities.
    LinkTransfer call =
        Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB);
    call.prefetch_call = true;
    link.Submit(call, 0);
    // A pre-eviction stays on the fault path's lane either way.
    link.Submit(Make(3, LinkDirection::kDeviceToHost, TransferKind::kFaultMigration, k2MiB), 0);
    const std::map<TransferId, Nanos> done = Drain(link);
    const Nanos one = 1000 + 2097152;
    EXPECT_EQ(done.at(1), one);
    EXPECT_EQ(done.at(2), beside ? one : 2 * one) << beside;
    EXPECT_EQ(done.at(3), beside ? 2 * one : 3 * one) << beside;
  }
}

TEST(PcieLinkTest, APopulatingCallOccupiesItsLaneThoughItCopiesNothing) {
  LinkConfig config{1e9, 1e9, 1000};
  config.populate_overhead_ns = 24500;
  PcieLink link(config);
  LinkTransfer populate = Make(1, LinkDirection::kHostToDevice, TransferKind::kPrefetch, 0);
  populate.populates = true;
  link.Submit(populate, 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  // A zero-byte transfer that does not populate (a clean eviction) is
  // instant, as before.
  link.Submit(Make(3, LinkDirection::kDeviceToHost, TransferKind::kEviction, 0), 0);
  const std::map<TransferId, Nanos> done = Drain(link);
  EXPECT_EQ(done.at(1), 1000 + 24500);
  EXPECT_EQ(done.at(2), 1000 + 24500 + 1000 + 2097152);
  EXPECT_EQ(done.at(3), 0);
}

TEST(PcieLinkTest, HalfDuplexMovesOneTransferAtATimeByPriority) {
  LinkConfig config{1e9, 1e9, 0};
  config.full_duplex = false;
  PcieLink link(config);
  const Nanos d = 2097152;
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(3, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB), 0);
  const std::map<TransferId, Nanos> done = Drain(link);
  // The prefetch that started runs out; then the eviction goes before the
  // queued prefetch, and nothing overlaps.
  EXPECT_EQ(done.at(1), d);
  EXPECT_EQ(done.at(3), 2 * d);
  EXPECT_EQ(done.at(2), 3 * d);
}

TEST(PcieLinkTest, DependentTransferWaitsForItsPredecessor) {
  PcieLink link(LinkConfig{1e9, 1e9, 0});
  link.Submit(Make(1, LinkDirection::kDeviceToHost, TransferKind::kEviction, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB, 0, 1),
              0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(1), 2097152);
  EXPECT_EQ(done.at(2), 2 * 2097152);
}

TEST(PcieLinkTest, DependencyOnAFinishedTransferIsMet) {
  PcieLink link(LinkConfig{1e9, 1e9, 0});
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, 4096), 0);
  Drain(link);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, 4096, 0, 1),
              10000);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(2), 10000 + 4096);
}

TEST(PcieLinkTest, ZeroByteTransfersDoNotOccupyTheLink) {
  PcieLink link(LinkConfig{1e9, 1e9, 1000});
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kPrefetch, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, 0, 500), 0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(2), 500);
  EXPECT_EQ(done.at(1), 1000 + 2097152);
}

TEST(PcieLinkTest, ReadyTimeDelaysTheStartAndLetsOthersGoFirst) {
  PcieLink link(LinkConfig{1e9, 1e9, 0});
  link.Submit(Make(1, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, 4096, 50000),
              0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kPrefetch, 4096), 0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(2), 4096);
  EXPECT_EQ(done.at(1), 50000 + 4096);
  EXPECT_TRUE(link.idle());
}

// The g10-a100 link: 1 GB/s each way to the host, and storage at 0.25 GB/s
// in and 0.125 GB/s out with 20 and 16 us of latency (round numbers so the
// durations read off exactly).
LinkConfig LinkWithStorage(bool full_duplex = true) {
  LinkConfig config{1e9, 1e9, 1000, 0, full_duplex};
  config.storage = StorageConfig{true, 0.25e9, 0.125e9, 20000, 16000};
  return config;
}

LinkTransfer FromStorage(TransferId id, LinkDirection direction, uint64_t bytes) {
  LinkTransfer transfer = Make(id, direction, TransferKind::kFaultMigration, bytes);
  transfer.storage_bytes = bytes;
  return transfer;
}

TEST(PcieLinkTest, StorageTransfersPayTheDrivesLatencyAndBandwidth) {
  PcieLink link(LinkWithStorage());
  EXPECT_EQ(link.Duration(LinkDirection::kHostToDevice, k2MiB, true, /*via_storage=*/true),
            1000 + 20000 + 4 * 2097152);
  EXPECT_EQ(link.Duration(LinkDirection::kDeviceToHost, k2MiB, true, /*via_storage=*/true),
            1000 + 16000 + 8 * 2097152);
  // A drive faster than the link is held to the link.
  LinkConfig fast = LinkWithStorage();
  fast.storage.read_bytes_per_second = 4e9;
  EXPECT_EQ(PcieLink(fast).Duration(LinkDirection::kHostToDevice, k2MiB, true, true),
            1000 + 20000 + 2097152);
}

TEST(PcieLinkTest, HostAndStorageShareEachDirection) {
  PcieLink link(LinkWithStorage());
  // Storage first, then a host transfer beside it: the host gets what the
  // drive leaves of the link (0.75 GB/s) for its whole transfer.
  link.Submit(FromStorage(1, LinkDirection::kHostToDevice, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB), 0);
  // A host transfer after the storage lane went idle has the link to itself.
  link.Submit(Make(3, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB,
                   /*ready=*/20000000),
              0);
  const auto done = Drain(link);
  EXPECT_EQ(done.at(1), 1000 + 20000 + 4 * 2097152);
  EXPECT_EQ(done.at(2), 1000 + std::llround(2097152 / 0.75));
  EXPECT_EQ(done.at(3), 20000000 + 1000 + 2097152);
}

TEST(PcieLinkTest, HalfDuplexMovesStorageInTheOneLane) {
  PcieLink link(LinkWithStorage(/*full_duplex=*/false));
  link.Submit(FromStorage(1, LinkDirection::kDeviceToHost, k2MiB), 0);
  link.Submit(Make(2, LinkDirection::kHostToDevice, TransferKind::kFaultMigration, k2MiB), 0);
  const auto done = Drain(link);
  const Nanos storage_write = 1000 + 16000 + 8 * 2097152;
  EXPECT_EQ(done.at(1), storage_write);
  EXPECT_EQ(done.at(2), storage_write + 1000 + 2097152);
}

TEST(PcieLinkTest, StorageBytesWithoutAStorageTierMoveAsHostBytes) {
  PcieLink link(LinkConfig{1e9, 1e9, 1000});
  link.Submit(FromStorage(1, LinkDirection::kHostToDevice, k2MiB), 0);
  EXPECT_EQ(Drain(link).at(1), 1000 + 2097152);
}

}  // namespace
}  // namespace umlab
