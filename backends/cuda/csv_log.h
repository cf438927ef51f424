// A CSV file that a backend parameter names (records=FILE, kernels=FILE):
// opened when the run starts, with its header line, so that a bad path is
// a one-line error before anything runs.
#ifndef UMLAB_BACKENDS_CUDA_CSV_LOG_H_
#define UMLAB_BACKENDS_CUDA_CSV_LOG_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace umlab::cuda {

using CsvLog = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

inline CsvLog NoCsvLog() { return CsvLog(nullptr, &std::fclose); }

// A time as the logs write it: ns since the run began at `run_start` (on
// the same clock), or -1 where the record gives none (0).
inline long long LogTime(uint64_t time, uint64_t run_start) {
  return time == 0 ? -1LL : static_cast<long long>(time) - static_cast<long long>(run_start);
}

// Leaves `log` empty when `path` is; otherwise opens it for writing and
// writes `header`. `param` names the parameter in the error.
absl::Status OpenCsvLog(const std::string& path, const char* param, const char* header,
                        CsvLog& log);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CSV_LOG_H_
