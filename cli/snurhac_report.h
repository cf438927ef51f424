// What `umlab snurhac` prints: one row per cluster run (a grid program, a
// scheme, a device count), as a text table or as JSON.
#ifndef UMLAB_CLI_SNURHAC_REPORT_H_
#define UMLAB_CLI_SNURHAC_REPORT_H_

#include <string>
#include <vector>

#include "cli/output_format.h"
#include "cli/runner/cluster_study.h"

namespace umlab::cli {

// Columns: the program, scheme and devices; the time and its parts; the
// speedup over the thesis's baseline (one device with explicit copies,
// snurhac::ExplicitCopyTime) and over the same scheme on one device (when
// that run is among the results); faults, bytes fetched from the host and
// from peers, over the network, and prefetched; kernels run on one device.
std::string ClusterTable(const std::vector<ClusterCaseResult>& results);

// The same runs as a JSON array of objects, one per run, with the device
// totals and the per-device counters.
std::string ClusterJson(const std::vector<ClusterCaseResult>& results);

// --format's choices: table (the default), json.
const FormatList<std::vector<ClusterCaseResult>>& ClusterFormats();

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SNURHAC_REPORT_H_
