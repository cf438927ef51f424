// Virtual time for the sim backend: it only moves forward, and only when
// the event loop says so.
#ifndef UMLAB_EMU_VIRTUAL_CLOCK_H_
#define UMLAB_EMU_VIRTUAL_CLOCK_H_

#include <algorithm>

#include "core/memory_units.h"

namespace umlab {

class VirtualClock {
 public:
  Nanos now() const { return now_; }
  // Moves to `time`; a time in the past leaves the clock where it is.
  void AdvanceTo(Nanos time) { now_ = std::max(now_, time); }

 private:
  Nanos now_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_EMU_VIRTUAL_CLOCK_H_
