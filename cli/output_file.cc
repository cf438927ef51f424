#include "cli/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_format.h"

namespace umlab::cli {

absl::Status WriteOutputFile(const std::string& path, const std::string& what,
                             const std::function<void(std::ostream&)>& write) {
  const std::string temporary = path + ".tmp";
  std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
  if (!file) {
    return absl::UnavailableError(absl::StrFormat("%s: cannot write the %s: %s; check the path",
                                                  path, what, std::strerror(errno)));
  }
  write(file);
  file.close();
  if (!file || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrFormat(
        "%s: cannot write the %s; check the directory and free space", path, what));
  }
  return absl::OkStatus();
}

}  // namespace umlab::cli
