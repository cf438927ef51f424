#include "backends/cuda/csv_log.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace umlab::cuda {

absl::Status OpenCsvLog(const std::string& path, const char* param, const char* header,
                        CsvLog& log) {
  if (path.empty()) return absl::OkStatus();
  log.reset(std::fopen(path.c_str(), "w"));
  if (log == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "backend cuda: cannot write %s=%s (%s); give a writable path", param, path,
        std::strerror(errno)));
  }
  std::fputs(header, log.get());
  return absl::OkStatus();
}

}  // namespace umlab::cuda
