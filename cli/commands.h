// The `umlab` command: subcommands, their options and their help.
#ifndef UMLAB_CLI_COMMANDS_H_
#define UMLAB_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"

namespace umlab::cli {

// Runs `umlab ARGS...` (args exclude the program name). `err_columns` is the
// width of the terminal `err` writes to, 0 when it is not a terminal (main()
// asks the terminal); a long run draws a progress line on `err` only when
// it is one.
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
         int err_columns = 0);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_COMMANDS_H_
