// The report of `umlab inspect`: a trace read end to end and summarised, as
// text or JSON. CSV does not apply: the summary is a header, a metadata
// dictionary and event counts, not rows of one kind.
#ifndef UMLAB_CLI_TRACE_SUMMARY_H_
#define UMLAB_CLI_TRACE_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/output_format.h"

namespace umlab::cli {

struct TraceSummary {
  std::string file;
  uint32_t version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;  // in file order
  std::map<std::string, uint64_t> events;                      // by kind name
  uint64_t iterations = 0;
  uint64_t kernels = 0;
  uint64_t distinct_kernels = 0;
  uint64_t page_accesses = 0;
  uint64_t faults = 0;
  uint64_t migrated_bytes = 0;
  uint64_t written_back_bytes = 0;
  // The program's copies (kCopy), by direction.
  uint64_t copied_in_bytes = 0;
  uint64_t copied_out_bytes = 0;
};

// Reads every chunk of the trace at `path`, so damage anywhere is an error.
absl::StatusOr<TraceSummary> SummarizeTrace(const std::string& path);

const FormatList<TraceSummary>& TraceSummaryFormats();

std::string TraceSummaryText(const TraceSummary& summary);
std::string TraceSummaryJson(const TraceSummary& summary);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_TRACE_SUMMARY_H_
