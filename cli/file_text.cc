#include "cli/file_text.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"

namespace umlab::cli {

absl::StatusOr<std::string> ReadFileText(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrFormat("cannot read %s", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.flush();
    if (!file) {
      std::remove(temporary.c_str());
      return absl::UnavailableError(absl::StrFormat("cannot write %s", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::UnavailableError(absl::StrFormat("cannot replace %s", path));
  }
  return absl::OkStatus();
}

}  // namespace umlab::cli
