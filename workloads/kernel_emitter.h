// Writes one kernel launch into a generated program: its define (first
// launch only), its begin, its accesses, its end. The generators share it so
// that every program spells a launch the same way, the way KernelAssembler
// reads it back.
#ifndef UMLAB_WORKLOADS_KERNEL_EMITTER_H_
#define UMLAB_WORKLOADS_KERNEL_EMITTER_H_

#include <cstdint>
#include <deque>
#include <string>

#include "core/event.h"
#include "core/memory_units.h"

namespace umlab {

class KernelEmitter {
 public:
  // Appends the define of `exec_id` named `*define_name`, running at
  // `place`, when that is not null (its first launch), then its begin with
  // `duration_ns` of compute.
  KernelEmitter(std::deque<Event>& out, uint32_t exec_id, Nanos duration_ns,
                const std::string* define_name, KernelPlace place = KernelPlace::kDevice);

  // The kernel touches [address, address + size).
  void Access(AccessType access, uint64_t address, uint64_t size, uint32_t rereads = 0);
  // Appends the end; the emitter is spent.
  void End();

 private:
  std::deque<Event>& out_;
  const uint32_t exec_id_;
};

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_KERNEL_EMITTER_H_
