// What `umlab run` uses for an option left out; `sweep` checks its cases
// with the same values.
#ifndef UMLAB_CLI_RUN_DEFAULTS_H_
#define UMLAB_CLI_RUN_DEFAULTS_H_

namespace umlab::cli {

inline constexpr char kDefaultDevice[] = "v100-pcie3";
inline constexpr char kDefaultWorkload[] = "mlp";
inline constexpr char kDefaultCapacity[] = "0.5";
inline constexpr char kDefaultPolicy[] = "demand";
inline constexpr char kDefaultBackend[] = "sim";
inline constexpr char kDefaultReplay[] = "batch";

}  // namespace umlab::cli

#endif  // UMLAB_CLI_RUN_DEFAULTS_H_
