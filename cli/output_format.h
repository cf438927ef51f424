// Output formats: the ways a command can print its report (--format).
//
// Each kind of report (the runs of run/compare/replay/record, a trace
// summary for inspect) has one list of the formats it supports: a name, a
// line of help and a renderer. The command builds its --format option from
// that list and looks the name up in it, so the help text and what is
// accepted cannot drift, and a format a report does not support is a
// one-line usage error instead of a silent fallback. Adding a format to a
// report is writing its renderer and adding one entry to the report's list.
#ifndef UMLAB_CLI_OUTPUT_FORMAT_H_
#define UMLAB_CLI_OUTPUT_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/arguments.h"

namespace umlab::cli {

template <typename Report>
struct OutputFormat {
  std::string name;  // what --format takes
  std::string help;  // one line, for --help
  std::string (*render)(const Report& report);
};

template <typename Report>
using FormatList = std::vector<OutputFormat<Report>>;

// "table, json or csv".
template <typename Report>
std::string FormatNames(const FormatList<Report>& formats) {
  std::string out;
  for (size_t i = 0; i < formats.size(); ++i) {
    if (i > 0) out += i + 1 == formats.size() ? " or " : ", ";
    out += formats[i].name;
  }
  return out;
}

// The --format option of a command whose report has these formats; the
// first one is the default.
template <typename Report>
OptionSpec FormatOption(const FormatList<Report>& formats) {
  std::string help = "output:";
  for (size_t i = 0; i < formats.size(); ++i) {
    absl::StrAppend(&help, i == 0 ? " " : ", ", formats[i].name, " (", formats[i].help, ")");
  }
  return {"format", "FMT", help, formats.front().name};
}

template <typename Report>
absl::StatusOr<const OutputFormat<Report>*> FindFormat(const FormatList<Report>& formats,
                                                       const std::string& name) {
  for (const OutputFormat<Report>& format : formats) {
    if (format.name == name) return &format;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("--format=%s is not supported here; use %s", name, FormatNames(formats)));
}

}  // namespace umlab::cli

#endif  // UMLAB_CLI_OUTPUT_FORMAT_H_
