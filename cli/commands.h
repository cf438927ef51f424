// The `umlab` command: subcommands, their options and their help.
#ifndef UMLAB_CLI_COMMANDS_H_
#define UMLAB_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"

namespace umlab::cli {

// Runs `umlab ARGS...` (args exclude the program name).
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_COMMANDS_H_
