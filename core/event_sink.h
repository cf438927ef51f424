// Where a backend reports what it ran and saw, e.g. a trace being recorded.
#ifndef UMLAB_CORE_EVENT_SINK_H_
#define UMLAB_CORE_EVENT_SINK_H_

#include "core/event.h"

namespace umlab {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Record(const Event& event) = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_EVENT_SINK_H_
