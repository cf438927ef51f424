#include "backends/emu/pcie_throttle.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cmath>

namespace umlab {
namespace {

// Below this much time left, spin instead of sleeping: a nanosleep that
// short overshoots by about as much as it waits. Kept small because the
// emulator's threads share a few cores.
constexpr Nanos kSpinNanos = 15000;

}  // namespace

Nanos MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SleepUntilNanos(Nanos deadline) {
  // The default 50 us timer slack would dominate a 4 KiB transfer's time.
  thread_local bool slack_set = false;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    slack_set = true;
  }
  for (;;) {
    const Nanos left = deadline - MonotonicNanos();
    if (left <= 0) return;
    if (left > kSpinNanos) {
      const Nanos wake = deadline - kSpinNanos / 2;
      timespec ts{static_cast<time_t>(wake / 1000000000), static_cast<long>(wake % 1000000000)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    }
  }
}

PcieThrottle::PcieThrottle(const LinkConfig& link, double dilation, bool enabled)
    : link_(link),
      dilation_(dilation),
      enabled_(enabled && dilation > 0) {}

Nanos PcieThrottle::Dilate(Nanos modelled) const {
  if (!enabled_ || modelled <= 0) return 0;
  return static_cast<Nanos>(std::llround(static_cast<double>(modelled) * dilation_));
}

Nanos PcieThrottle::Modelled(Nanos wall) const {
  if (!enabled_) return wall;
  return static_cast<Nanos>(std::llround(static_cast<double>(wall) / dilation_));
}

Nanos PcieThrottle::Reserve(LinkDirection direction, uint64_t bytes, Nanos now,
                            bool via_storage, bool fault_path) {
  // A fault migration that only zero-fills still costs the fault path its
  // overhead, as on the sim (LinkTransfer::fault_zero_fill).
  if (!enabled_ || (bytes == 0 && !link_.FaultPathWorksWithoutBytes(direction, fault_path))) {
    return now;
  }
  // Half duplex (LinkConfig::full_duplex false): everything books lane 0.
  const int lane = link_.LaneOf(direction, via_storage);
  const int beside = link_.StorageLaneBeside(lane);
  via_storage = via_storage && link_.has_storage();
  absl::MutexLock lock(&mu_);
  Nanos& busy = busy_until_[lane];
  const Nanos start = std::max(busy, now);
  const bool storage_busy = beside >= 0 && busy_until_[beside] > start;
  busy = start + Dilate(link_.Duration(direction, bytes, true, via_storage, storage_busy,
                                       fault_path));
  return busy;
}

Nanos PcieThrottle::ReserveRemote(LinkDirection direction, uint64_t bytes, Nanos now) {
  if (!enabled_ || bytes == 0) return now;
  // Remote accesses never touch storage; on the sim they keep their rate
  // whatever the drive does (PcieLink::StartNext).
  const int lane = link_.LaneOf(direction, /*via_storage=*/false);
  absl::MutexLock lock(&mu_);
  Nanos& busy = busy_until_[lane];
  busy = std::max(busy, now) + Dilate(link_.RemoteDuration(direction, bytes));
  return busy;
}

Nanos PcieThrottle::ReserveDma(LinkDirection direction, uint64_t bytes, Nanos now) {
  if (!enabled_ || bytes == 0) return now;
  const int lane = link_.LaneOf(direction, /*via_storage=*/false);
  absl::MutexLock lock(&mu_);
  Nanos& busy = busy_until_[lane];
  busy = std::max(busy, now) + Dilate(link_.DmaDuration(direction, bytes));
  return busy;
}

}  // namespace umlab
