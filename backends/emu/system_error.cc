#include "backends/emu/system_error.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace umlab {

std::string ErrnoText(int error) { return std::strerror(error); }

absl::Status ErrnoStatus(absl::string_view device, absl::string_view what) {
  const int error = errno;  // before anything else can change it
  return absl::InternalError(absl::StrFormat("%s: %s: %s", device, what, ErrnoText(error)));
}

}  // namespace umlab
