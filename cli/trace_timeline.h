// `umlab timeline FILE.umt`: the part of a timeline a `.umt` trace holds.
// A trace (docs/trace-format.md) stamps only what the backend
// observed: each fault, and each migration, write-back and drop when it was
// issued. Kernels, iterations and fault batches carry no times in it, and
// a transfer's landing is not recorded, so those tracks stay empty (the
// file's notes say so) and transfers are instants at their issue. For every
// track, run the program with `--timeline=FILE` instead.
#ifndef UMLAB_CLI_TRACE_TIMELINE_H_
#define UMLAB_CLI_TRACE_TIMELINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/timeline_recorder.h"

namespace umlab::cli {

struct TraceTimeline {
  Timeline timeline;
  std::vector<std::pair<std::string, std::string>> metadata;  // the trace's header
};

// Reads the whole trace; a damaged one is an error, as for `inspect`.
absl::StatusOr<TraceTimeline> TimelineFromTrace(const std::string& path);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_TRACE_TIMELINE_H_
