// A whole program, read before the timed run and laid out for the GPU.
//
// The cuda backend replays at the GPU's own pace: every kernel's page list
// is in device memory before the first launch, kernels go back to back in
// stream order, and the host learns of each kernel's begin and end from the
// device. For that it needs the program up front: its kernels with their
// accesses as compact ranges, the events that come between kernels (held
// back until the kernel after them begins, when the engine hears of them),
// and the address ranges the program ever reserves, merged, so that all
// managed memory exists before the run and no allocation call stalls it.
#ifndef UMLAB_BACKENDS_CUDA_REPLAY_PLAN_H_
#define UMLAB_BACKENDS_CUDA_REPLAY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/event.h"
#include "core/event_source.h"

namespace umlab::cuda {

// A run of consecutive pages one kernel accesses, in program addresses.
struct PlannedRange {
  uint64_t first_page;
  uint64_t pages;
  bool write;
};

struct PlannedKernel {
  Event begin;
  Event end;
  // A host kernel (KernelPlace::kHost): CPU work in stream order, its
  // ranges the CPU's accesses; the launch thread runs it (cuda_backend.h).
  bool on_host = false;
  uint64_t first_range = 0;  // into ReplayPlan::ranges
  uint64_t range_count = 0;
  uint64_t accesses = 0;     // pages, repeats included
  // Program events (allocations, frees, iteration markers) that come before
  // this kernel and after the previous one: [first_event, first_event + event_count)
  // of ReplayPlan::between.
  uint64_t first_event = 0;
  uint64_t event_count = 0;
  // The kernel's own events (begin, accesses, end) for a recorder; empty
  // unless the plan was built with `keep_kernel_events`.
  std::vector<Event> events;
};

// An address range the program reserves at some point.
struct PlannedSegment {
  uint64_t address;
  uint64_t size;
};

struct ReplayPlan {
  std::vector<PlannedKernel> kernels;
  std::vector<PlannedRange> ranges;
  std::vector<Event> between;      // non-kernel program events, in order
  uint64_t trailing_events = 0;    // of `between`, the ones after the last kernel
  uint64_t host_kernels = 0;       // of `kernels`, those on the host
  // Every reserved range, overlapping and adjacent ones merged: what the
  // backend backs with managed memory for the whole run.
  std::vector<PlannedSegment> segments;
  uint64_t segment_bytes = 0;

  uint64_t total_accesses() const;
};

// Reads `program` to its end. Fails on a malformed program (the kernel
// assembler's errors) or an access outside every reserved range.
absl::StatusOr<ReplayPlan> BuildReplayPlan(EventSource& program, bool keep_kernel_events);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_REPLAY_PLAN_H_
