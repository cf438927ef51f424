// The uffd backend's wall-clock link: bookings follow the same durations as
// the sim's PcieLink, per direction or, half duplex, on one lane.
#include "backends/emu/pcie_throttle.h"

#include <gtest/gtest.h>

namespace umlab {
namespace {

constexpr uint64_t k2MiB = 2ull << 20;

TEST(PcieThrottleTest, DirectionsBookTheirOwnLanes) {
  PcieThrottle throttle(LinkConfig{1e9, 1e9, 0}, /*dilation=*/1, /*enabled=*/true);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 0), 2097152);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kDeviceToHost, k2MiB, 0), 2097152);
  // The same direction again waits for its lane.
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 0), 2 * 2097152);
}

TEST(PcieThrottleTest, HalfDuplexBooksOneLaneAndEvictionsPayTheOverhead) {
  LinkConfig link{1e9, 1e9, 0};
  link.full_duplex = false;
  link.eviction_overhead_ns = 1000;
  PcieThrottle throttle(link, /*dilation=*/2, /*enabled=*/true);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 0), 2 * 2097152);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kDeviceToHost, k2MiB, 0),
            2 * 2097152 + 2 * (2097152 + 1000));
}

TEST(PcieThrottleTest, FaultMigrationsPayTheFaultPathsOverheadZeroFillsIncluded) {
  LinkConfig link{1e9, 1e9, 0};
  link.fault_block_overhead_ns = 1000;
  PcieThrottle throttle(link, /*dilation=*/2, /*enabled=*/true);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 0, false, /*fault_path=*/true),
            2 * (2097152 + 1000));
  // A zero-fill books the overhead alone, in its turn.
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, 0, 0, false, /*fault_path=*/true),
            2 * (2097152 + 1000) + 2 * 1000);
  // Not the fault path: no overhead, and nothing to move books nothing.
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, 0, 5, false, /*fault_path=*/false), 5);
  // Without an overhead a zero-fill books nothing either.
  PcieThrottle free_fills(LinkConfig{1e9, 1e9, 0}, 2, true);
  EXPECT_EQ(free_fills.Reserve(LinkDirection::kHostToDevice, 0, 7, false, /*fault_path=*/true), 7);
}

TEST(PcieThrottleTest, RemoteAccessesBookTheMigrationsLanesAtTheRemoteRates) {
  // Remote reads at 4 GB/s and writes at 0.5 GB/s, where DMA runs at 1 GB/s;
  // the per-transfer latency (1 us) is not theirs to pay.
  LinkConfig link{1e9, 1e9, 1000};
  link.remote_read_bytes_per_second = 4e9;
  link.remote_write_bytes_per_second = 0.5e9;
  PcieThrottle throttle(link, /*dilation=*/2, /*enabled=*/true);
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kHostToDevice, 4096, 0), 2 * 1024);
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kDeviceToHost, 100, 0), 2 * 200);
  // A migration the same way waits for the remote bytes ahead of it...
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, 4096, 0), 2 * 1024 + 2 * (1000 + 4096));
  // ...and a remote access behind it for the migration.
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kHostToDevice, 4096, 0),
            2 * 1024 + 2 * (1000 + 4096) + 2 * 1024);
  // No bytes, no booking.
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kHostToDevice, 0, 7), 7);
}

TEST(PcieThrottleTest, RemoteRatesDefaultToTheDmaRates) {
  PcieThrottle throttle(LinkConfig{1e9, 0.5e9, 0}, /*dilation=*/1, /*enabled=*/true);
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kHostToDevice, 4096, 0), 4096);
  EXPECT_EQ(throttle.ReserveRemote(LinkDirection::kDeviceToHost, 4096, 0), 8192);
}

TEST(PcieThrottleTest, DisabledBooksNothing) {
  PcieThrottle throttle(LinkConfig{1e9, 1e9, 0}, /*dilation=*/1, /*enabled=*/false);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 5), 5);
}

}  // namespace
}  // namespace umlab
