// A CSV file that a backend parameter names (records=FILE, kernels=FILE):
// opened when the run starts, with its header line, so that a bad path is
// a one-line error before anything runs.
#ifndef UMLAB_BACKENDS_CUDA_CSV_LOG_H_
#define UMLAB_BACKENDS_CUDA_CSV_LOG_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace umlab::cuda {

using CsvLog = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

inline CsvLog NoCsvLog() { return CsvLog(nullptr, &std::fclose); }

// Leaves `log` empty when `path` is; otherwise opens it for writing and
// writes `header`. `param` names the parameter in the error.
absl::Status OpenCsvLog(const std::string& path, const char* param, const char* header,
                        CsvLog& log);

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_CSV_LOG_H_
