// Reads a program stream and hands it back a step at a time: a program event
// outside any kernel as it comes, or a whole kernel (its begin, its accesses,
// its end) once the end arrives. Every backend runs a kernel only when it has
// all of it, so the structure of the stream is checked here, once, with one
// wording per malformed-program error (a copy is checked here too: it is
// well formed and outside every kernel). It also remembers which execution
// ids were defined as host kernels (KernelPlace).
#ifndef UMLAB_CORE_KERNEL_ASSEMBLER_H_
#define UMLAB_CORE_KERNEL_ASSEMBLER_H_

#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/event.h"
#include "core/event_source.h"

namespace umlab {

class KernelAssembler {
 public:
  explicit KernelAssembler(EventSource& program) : program_(program) {}

  // Advances to the next step and returns true, or returns false at the end
  // of the program or on an error; status() tells which. Observed events (a
  // replayed trace's faults and transfers) are skipped: a backend produces
  // its own.
  bool Next();

  // Whether the current step is a kernel (kernel_begin(), accesses(),
  // kernel_end()) rather than one event (event()).
  bool is_kernel() const { return is_kernel_; }
  const Event& event() const { return event_; }
  const Event& kernel_begin() const { return kernel_.front(); }
  const Event& kernel_end() const { return kernel_.back(); }
  absl::Span<const Event> accesses() const {
    return absl::MakeConstSpan(kernel_).subspan(1, kernel_.size() - 2);
  }
  // Begin, accesses and end in program order: what a recorder writes.
  absl::Span<const Event> kernel_events() const { return kernel_; }
  // Whether the current kernel runs on the host (its define said so).
  bool kernel_on_host() const { return host_kernels_.contains(kernel_.front().exec_id); }

  // OK after a clean end; the source's error or the malformed-program error
  // otherwise.
  const absl::Status& status() const { return status_; }

 private:
  bool Fail(const Event& event, absl::string_view what);

  EventSource& program_;
  Event event_;
  std::vector<Event> kernel_;  // reused: its capacity outlives each kernel
  absl::flat_hash_set<uint32_t> host_kernels_;  // exec ids defined as host kernels
  bool is_kernel_ = false;
  absl::Status status_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_KERNEL_ASSEMBLER_H_
