// Checks a policy or backend spec ("deepum:rows=1024", "sim:policy_from=user")
// against its registry without creating anything, so a command can reject a
// typo before it runs (or writes) anything. `run`, `compare` and `sweep`
// share these, so their errors read the same.
#ifndef UMLAB_CLI_SPEC_CHECK_H_
#define UMLAB_CLI_SPEC_CHECK_H_

#include <string>

#include "absl/status/status.h"

namespace umlab::cli {

// InvalidArgument naming the unknown policy, or the parameter that is wrong.
absl::Status CheckPolicySpec(const std::string& spec);

// InvalidArgument naming the backend missing from this build, or the
// parameter that is wrong.
absl::Status CheckBackendSpec(const std::string& spec);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_SPEC_CHECK_H_
