// Every kernel launch of the process, seen through CUPTI's callback API at
// the CUDA driver's launch calls (cuLaunchKernel and cuLaunchKernelEx, which
// the runtime's launches go through), named by DeepUM's execution id
// (core/execution_id.h): the kernel's name, its grid, block and shared
// memory, and its argument bytes, laid out by cuFuncGetParamInfo.
//
// CUPTI allows one subscriber per process, so only one observer may exist.
#ifndef UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_
#define UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace umlab::cuda {

struct LaunchCounts {
  uint64_t launches = 0;          // driver launch calls observed
  uint64_t execution_ids = 0;     // distinct executions among them
  // Distinct executions when only the arguments that point into managed
  // memory count (the tensors), not scalars such as seeds and step counts.
  uint64_t tensor_execution_ids = 0;
  uint64_t runtime_launches = 0;  // runtime launch calls, as a cross-check
  uint64_t unsized_launches = 0;  // launches whose argument layout was unknown
};

class LaunchObserver {
 public:
  static absl::StatusOr<std::unique_ptr<LaunchObserver>> Start();
  ~LaunchObserver();

  LaunchCounts counts() const;
  // The execution id of every launch so far, in launch order, as DeepUM
  // hashes it (every argument byte) or by its tensors only.
  std::vector<uint32_t> sequence() const;
  std::vector<uint32_t> tensor_sequence() const;

 private:
  LaunchObserver() = default;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_
