// The `umlab` command: subcommands, their options and their help.
#ifndef UMLAB_CLI_COMMANDS_H_
#define UMLAB_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace umlab::cli {

// Exit codes: 0 success, 1 a check or run failed, 2 a usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs `umlab ARGS...` (args exclude the program name).
int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_COMMANDS_H_
