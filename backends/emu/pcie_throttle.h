// The PCIe link in real time: per-direction bandwidth and per-transfer
// latency, enforced on a wall clock and stretched by a dilation factor.
//
// The emulator cannot copy faster than host memcpy, so modelled durations
// are multiplied by `dilation`: with dilation 4 a 2 MiB transfer over PCIe 3
// (5 us + 133 us) takes 552 us of wall time. Ratios between transfers, and
// between transfers and dilated kernel compute, stay those of the model.
//
// Each direction carries one transfer at a time (both share one lane when
// LinkConfig::full_duplex is false, as in the sim). Reserve() books the lane
// back to back from where the previous booking ended, not from when its
// owner woke up, so oversleeping one transfer does not slow the link down:
// over a stream of transfers the achieved bandwidth is the configured one.
// Durations come from PcieLink::Duration (RemoteDuration for remote
// accesses), the same formulas the sim uses.
// Thread-safe.
#ifndef UMLAB_BACKENDS_EMU_PCIE_THROTTLE_H_
#define UMLAB_BACKENDS_EMU_PCIE_THROTTLE_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "emu/pcie_link.h"

namespace umlab {

// CLOCK_MONOTONIC in nanoseconds: the real backends' wall clock.
Nanos MonotonicNanos();

// Sleeps until MonotonicNanos() >= deadline. Sleeps coarsely, then spins for
// the last stretch, so that short transfers end on time (timer slack and
// scheduler wake-up latency are tens of microseconds).
void SleepUntilNanos(Nanos deadline);

class PcieThrottle {
 public:
  // `enabled` false: every transfer completes as soon as its copy is done.
  PcieThrottle(const LinkConfig& link, double dilation, bool enabled);

  // Books `bytes` on the `direction` lane for a transfer ready at wall time
  // `now`: it starts then, or when the lane's previous booking ends if that
  // is later. Returns the wall time at which it completes. A transfer of no
  // bytes does not occupy the link (as in PcieLink) and completes at `now`.
  // `via_storage`: to or from the storage tier, on that direction's storage
  // lane, and a host booking that starts while it runs gets what the drive
  // leaves of the link, as PcieLink models it. `fault_path`: the engine's
  // fault migration (host to device), which copies at the fault path's rate
  // and pays its overhead per migration, also with no bytes (a zero-fill),
  // as the sim's LinkTransfer::fault_path and fault_zero_fill.
  Nanos Reserve(LinkDirection direction, uint64_t bytes, Nanos now, bool via_storage = false,
                bool fault_path = false);
  // Books an SM's own loads (host to device) or stores (device to host)
  // through a remote mapping: `bytes` on the `direction` lane, beside the
  // migrations, at the link's remote rate (PcieLink::RemoteDuration, as the
  // sim's LinkTransfer::remote). Returns the wall time at which they have
  // crossed; the accessor's round trip (remote_latency_ns) is not included.
  Nanos ReserveRemote(LinkDirection direction, uint64_t bytes, Nanos now);

  // Books a program's own copy (a DMA, cudaMemcpy) of `bytes` on the
  // `direction` lane at the link's copy rate (PcieLink::DmaDuration, as the
  // sim's LinkTransfer::dma). Returns the wall time at which it lands.
  Nanos ReserveDma(LinkDirection direction, uint64_t bytes, Nanos now);

  // A modelled duration in wall time: `modelled` x dilation, 0 when off.
  Nanos Dilate(Nanos modelled) const;
  // The inverse: a wall-clock duration in modelled time, `wall` / dilation.
  // With the throttle off nothing is modelled and time is the wall clock's.
  Nanos Modelled(Nanos wall) const;

  bool enabled() const { return enabled_; }
  double dilation() const { return dilation_; }

 private:
  PcieLink link_;  // for Duration() only: one formula for sim and uffd
  double dilation_;
  bool enabled_;
  absl::Mutex mu_;
  // By PcieLink's lanes.
  std::array<Nanos, PcieLink::kLanes> busy_until_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_PCIE_THROTTLE_H_
