// The runs an HTML report is drawn from, read back from the JSON contract
// (docs/json-contract.md) and nothing else: `umlab report` reads files that
// `run|replay|compare --format=json` wrote, and `compare --report` renders
// its own JSON text and reads that, so both draw from the same documented
// keys.
#ifndef UMLAB_CLI_REPORT_INPUT_H_
#define UMLAB_CLI_REPORT_INPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/json_text.h"

namespace umlab::cli {

// One run object of the contract, checked to hold the keys the report
// draws with the types they must have.
struct ReportRun {
  std::string source;  // the file it came from, for the page's footnote
  Json json;           // the run object as read
};

// Parses one document (`{"contract_version":"1.0","runs":[...]}`) of
// `text`, read from `source`; a newer major contract version is refused
// (CheckJsonContractVersion). Errors are one line, naming `source`.
absl::StatusOr<std::vector<ReportRun>> ParseReportRuns(const std::string& text,
                                                        const std::string& source);

// Reads and parses a file.
absl::StatusOr<std::vector<ReportRun>> ReadReportRuns(const std::string& path);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_REPORT_INPUT_H_
