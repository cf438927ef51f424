#include "workloads/kernel_emitter.h"

#include <utility>

namespace umlab {

KernelEmitter::KernelEmitter(std::deque<Event>& out, uint32_t exec_id, Nanos duration_ns,
                             const std::string* define_name, KernelPlace place)
    : out_(out), exec_id_(exec_id) {
  Event event;
  event.exec_id = exec_id;
  if (define_name != nullptr) {
    event.kind = EventKind::kKernelDefine;
    event.name = *define_name;
    event.cause = static_cast<uint8_t>(place);
    out_.push_back(std::move(event));
    event = Event{};
    event.exec_id = exec_id;
  }
  event.kind = EventKind::kKernelBegin;
  event.duration_ns = duration_ns;
  out_.push_back(std::move(event));
}

void KernelEmitter::Access(AccessType access, uint64_t address, uint64_t size,
                           uint32_t rereads) {
  Event event;
  event.kind = EventKind::kAccess;
  event.exec_id = exec_id_;
  event.access = access;
  event.address = address;
  event.size = size;
  event.rereads = rereads;
  out_.push_back(std::move(event));
}

void KernelEmitter::End() {
  Event event;
  event.kind = EventKind::kKernelEnd;
  event.exec_id = exec_id_;
  out_.push_back(std::move(event));
}

}  // namespace umlab
