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

TEST(PcieThrottleTest, DisabledBooksNothing) {
  PcieThrottle throttle(LinkConfig{1e9, 1e9, 0}, /*dilation=*/1, /*enabled=*/false);
  EXPECT_EQ(throttle.Reserve(LinkDirection::kHostToDevice, k2MiB, 5), 5);
}

}  // namespace
}  // namespace umlab
