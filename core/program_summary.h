// A pre-scan of a program: its footprint and shape, known before it runs.
#ifndef UMLAB_CORE_PROGRAM_SUMMARY_H_
#define UMLAB_CORE_PROGRAM_SUMMARY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/event_source.h"

namespace umlab {

struct ProgramSummary {
  // Peak device memory the program reserves, in whole 2 MB blocks: the
  // denominator of `--capacity=FRACTION`. Programs without allocator events
  // (some imported traces) count the distinct blocks they touch instead.
  uint64_t footprint_bytes = 0;
  uint64_t iterations = 0;
  uint64_t kernels = 0;
  uint64_t accessed_pages = 0;  // page accesses, repeats included
  uint64_t events = 0;
  uint64_t observed_events = 0; // faults, migrations... recorded by a backend
  int64_t compute_ns = 0;
};

// Reads `program` to its end. Fails with the source's error.
absl::StatusOr<ProgramSummary> SummarizeProgram(EventSource& program);

}  // namespace umlab

#endif  // UMLAB_CORE_PROGRAM_SUMMARY_H_
