// Writing a whole output file (a report, a timeline) so that a reader never
// sees half of one: the text goes to PATH.tmp, which is renamed to PATH only
// once it is complete; on failure the .tmp is removed and PATH is untouched.
#ifndef UMLAB_CLI_OUTPUT_FILE_H_
#define UMLAB_CLI_OUTPUT_FILE_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace umlab::cli {

// `what` names the file in errors ("report", "timeline").
absl::Status WriteOutputFile(const std::string& path, const std::string& what,
                             const std::function<void(std::ostream&)>& write);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_OUTPUT_FILE_H_
