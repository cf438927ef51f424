// A stream of events: a workload program, or a trace being read back.
#ifndef UMLAB_CORE_EVENT_SOURCE_H_
#define UMLAB_CORE_EVENT_SOURCE_H_

#include "absl/status/status.h"
#include "core/event.h"

namespace umlab {

class EventSource {
 public:
  virtual ~EventSource() = default;

  // Fills `event` with the next event and returns true. Returns false at the
  // end of the stream or on error; status() tells which.
  virtual bool Next(Event& event) = 0;

  // OK after a clean end; the reason otherwise (a corrupt trace, say).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

}  // namespace umlab

#endif  // UMLAB_CORE_EVENT_SOURCE_H_
