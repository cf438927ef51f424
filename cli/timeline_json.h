// A Timeline (core/timeline_recorder.h) as Chrome trace-event JSON, the
// format Perfetto (ui.perfetto.dev) and chrome://tracing open: one process,
// one thread per track, times in microseconds (docs/report.md).
//
// Tracks: "compute stream" (iterations as B/E, kernels as X slices),
// "fault service" (each fault batch from fetch to replay), "h2d link" and
// "d2h link" (each migration and write-back), "prefetches issued",
// "invalidations", "device evictions" and, from a trace, "faults" (instant
// events); counters (C) "device memory" and "queue depth".
//
// A link slice runs from when its transfer could start (issued, its fault
// latency passed, the transfer it waited for landed, and the one before it
// on that direction finished) to when it landed. Each direction of the
// sim's link moves one transfer at a time, so there this is the transfer's
// time on the link; on a backend that moves several at once (uffd's
// workers) it is an estimate. A transfer whose landing is unknown (a trace
// records only the issue) is an instant event at its issue.
#ifndef UMLAB_CLI_TIMELINE_JSON_H_
#define UMLAB_CLI_TIMELINE_JSON_H_

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/timeline_recorder.h"

namespace umlab::cli {

// The track ids (trace-event "tid") of the tracks above.
enum class TimelineTrack : int {
  kCompute = 1,
  kFaultService = 2,
  kHostToDevice = 3,
  kDeviceToHost = 4,
  kPrefetches = 5,
  kInvalidations = 6,
  kDeviceEvictions = 7,
  kFaults = 8,
};

// `metadata`: key/value pairs for the file's "otherData" (the run's policy,
// workload, ...).
void WriteTimelineJson(const Timeline& timeline,
                       const std::vector<std::pair<std::string, std::string>>& metadata,
                       std::ostream& out);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_TIMELINE_JSON_H_
