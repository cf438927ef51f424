// How a kernel's compute time is spread over its page accesses, the same on
// every backend (the sim's SMs, the uffd device's SM threads, the cuda
// backend's replay kernel): `issuers`, at most one per access, take the
// accesses from one shared cursor in program order, and each computes for
// `step` after every access it takes.
//
// The step is the compute divided by the accesses of the busiest issuer
// (the accesses over the issuers, rounded up), so a kernel in which nothing
// stalls lasts exactly its compute time however its accesses divide among
// the issuers. Dividing by the mean instead made a kernel of 1.5 accesses
// per issuer last 1.33x its compute; over the zoo on an H200 that added
// 0.4-1.6 us per kernel (docs/fidelity.md "Replay pace").
#ifndef UMLAB_CORE_ACCESS_PACE_H_
#define UMLAB_CORE_ACCESS_PACE_H_

#include <algorithm>
#include <cstdint>

#include "core/memory_units.h"

namespace umlab {

struct AccessPace {
  uint64_t issuers = 0;  // 0 for a kernel without accesses
  int64_t step_ps = 0;   // compute after each access, in picoseconds
};

// `streams` is how many issuers the device has (DeviceConfig::access_streams).
inline AccessPace PaceOf(Nanos compute_ns, uint64_t accesses, uint64_t streams) {
  AccessPace pace;
  if (accesses == 0 || streams == 0) return pace;
  pace.issuers = std::min(streams, accesses);
  const uint64_t rounds = (accesses + pace.issuers - 1) / pace.issuers;
  pace.step_ps = std::max<Nanos>(0, compute_ns) * 1000 / static_cast<int64_t>(rounds);
  return pace;
}

}  // namespace umlab

#endif  // UMLAB_CORE_ACCESS_PACE_H_
