// --format=csv for runs: a header, then one row per run with the JSON's
// scalar keys and the steady-state means the table shows.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/report.h"

namespace umlab::cli {

std::string CsvCell(const Json& value) {
  if (value.is_string()) {
    return absl::StrCat("\"", absl::StrReplaceAll(value.get<std::string>(), {{"\"", "\"\""}}),
                        "\"");
  }
  return JsonText(value);
}

std::string RunsCsv(const Runs& runs) {
  std::string out;
  if (runs.empty()) return out;
  std::vector<std::string> header;
  // items() refers into its object, so the object must outlive the loop.
  const Json first = RunScalars(runs[0]);
  for (const auto& field : first.items()) header.push_back(field.key());
  header.push_back("steady_faults_per_iteration");
  header.push_back("steady_time_ns_per_iteration");
  absl::StrAppend(&out, absl::StrJoin(header, ","), "\n");
  for (const RunResult& run : runs) {
    std::vector<std::string> row;
    const Json scalars = RunScalars(run);
    for (const auto& field : scalars.items()) row.push_back(CsvCell(field.value()));
    row.push_back(absl::StrFormat("%.1f", SteadyStateMean(run.stats, &IterationStats::faults)));
    row.push_back(absl::StrFormat("%.0f", SteadyStateMeanTime(run.stats)));
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

}  // namespace umlab::cli
