// The `umlab` command's exit codes, shared by every subcommand.
#ifndef UMLAB_CLI_EXIT_CODES_H_
#define UMLAB_CLI_EXIT_CODES_H_

namespace umlab::cli {

// 0 success, 1 a check or run failed, 2 a usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace umlab::cli

#endif  // UMLAB_CLI_EXIT_CODES_H_
