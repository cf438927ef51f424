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

AtomicWriteFailure StreamFileAtomically(const std::string& path,
                                        const std::function<void(std::ostream&)>& write) {
  const std::string temporary = path + ".tmp";
  std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
  if (!file) return AtomicWriteFailure::kOpen;
  write(file);
  file.close();
  if (!file) {
    std::remove(temporary.c_str());
    return AtomicWriteFailure::kWrite;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return AtomicWriteFailure::kRename;
  }
  return AtomicWriteFailure::kNone;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  switch (StreamFileAtomically(path, [&](std::ostream& out) { out << text; })) {
    case AtomicWriteFailure::kNone:
      return absl::OkStatus();
    case AtomicWriteFailure::kOpen:
    case AtomicWriteFailure::kWrite:
      return absl::UnavailableError(absl::StrFormat("cannot write %s.tmp", path));
    case AtomicWriteFailure::kRename:
      break;
  }
  return absl::UnavailableError(absl::StrFormat("cannot replace %s", path));
}

}  // namespace umlab::cli
