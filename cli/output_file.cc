#include "cli/output_file.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "cli/file_text.h"

namespace umlab::cli {

absl::Status WriteOutputFile(const std::string& path, const std::string& what,
                             const std::function<void(std::ostream&)>& write) {
  switch (StreamFileAtomically(path, write)) {
    case AtomicWriteFailure::kNone:
      return absl::OkStatus();
    case AtomicWriteFailure::kOpen:
      return absl::UnavailableError(absl::StrFormat(
          "%s: cannot write the %s: %s; check the path", path, what, std::strerror(errno)));
    case AtomicWriteFailure::kWrite:
    case AtomicWriteFailure::kRename:
      break;
  }
  return absl::UnavailableError(absl::StrFormat(
      "%s: cannot write the %s; check the directory and free space", path, what));
}

}  // namespace umlab::cli
