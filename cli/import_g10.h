// `umlab import-g10`: writes a G10 model's training program (the `g10`
// workload, workloads/g10/g10_workload.h) to a .umt trace, so it can be replayed,
// inspected or shared without G10's input files.
#ifndef UMLAB_CLI_IMPORT_G10_H_
#define UMLAB_CLI_IMPORT_G10_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/arguments.h"

namespace umlab::cli {

// Why the import failed and the exit code it deserves (2 usage, 1 bad input).
struct ImportG10Failure {
  int code;
  std::string message;
};

// The command's options, for the Commands() table and its --help.
std::vector<OptionSpec> ImportG10Options();

// Runs the command; nullopt on success (a one-line summary goes to `out`).
std::optional<ImportG10Failure> ImportG10(const Arguments& args, std::ostream& out);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_IMPORT_G10_H_
