// A fault-buffer entry, as a GPU's replayable fault buffer holds it.
#ifndef UMLAB_CORE_FAULT_H_
#define UMLAB_CORE_FAULT_H_

#include <cstdint>

#include "core/event.h"
#include "core/memory_units.h"

namespace umlab {

struct FaultEntry {
  PageNumber page = 0;
  AccessType access = AccessType::kRead;
  uint32_t sm = 0;       // the faulting SM (or thread, on the emulator)
  uint32_t exec_id = 0;  // the kernel running when it faulted
  Nanos time_ns = 0;
};

// The trace event of a fault the buffer accepted: what a backend hands its
// recorder, so that a trace holds the same fault whichever backend saw it.
inline Event FaultEvent(const FaultEntry& entry) {
  Event event;
  event.kind = EventKind::kFault;
  event.access = entry.access;
  event.sm = entry.sm;
  event.exec_id = entry.exec_id;
  event.address = entry.page * kPageSize;
  event.time_ns = entry.time_ns;
  return event;
}

}  // namespace umlab

#endif  // UMLAB_CORE_FAULT_H_
