// Every kernel launch of the process, seen through CUPTI's callback API at
// the CUDA driver's launch calls (cuLaunchKernel and cuLaunchKernelEx, which
// the runtime's launches go through), named by DeepUM's execution id
// (core/execution_id.h): the kernel's name, its grid, block and shared
// memory, and its argument bytes, laid out by cuFuncGetParamInfo.
//
// With stream stamps on, it also marks each launch in its stream, as DeepUM's
// runtime enqueues a callback before each kernel: the GPU writes the
// launch's sequence number to host-mapped memory when the stream reaches the
// kernel, and again when the kernel has finished (cuStreamWriteValue64, so
// nothing runs on the host and the stream is not held). begun() and ended()
// read them: on one stream, kernels begin and end in launch order.
//
// CUPTI allows one subscriber per process, so only one observer may exist.
#ifndef UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_
#define UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace umlab::cuda {

struct LaunchCounts {
  uint64_t launches = 0;          // driver launch calls observed
  uint64_t execution_ids = 0;     // distinct executions among them
  // Distinct executions when only the arguments that point into managed
  // memory count (the tensors), not scalars such as seeds and step counts.
  uint64_t tensor_execution_ids = 0;
  uint64_t runtime_launches = 0;  // runtime launch calls, as a cross-check
  uint64_t unsized_launches = 0;  // launches whose argument layout was unknown
  uint64_t unstamped_launches = 0;  // stamps the driver refused (stream stamps on)
};

// Hears each launch as it is made, on the launching thread, in launch order
// (under the observer's lock: keep it short): its execution id, kernel name
// and the argument words that point into live managed memory.
using LaunchListener = void (*)(void* context, uint32_t execution_id, absl::string_view name,
                                const uint64_t* words, size_t count);

class LaunchObserver {
 public:
  static absl::StatusOr<std::unique_ptr<LaunchObserver>> Start(bool stream_stamps = false);
  ~LaunchObserver();

  LaunchCounts counts() const;
  // The execution id of every launch so far, in launch order, as DeepUM
  // hashes it (every argument byte) or by its tensors only.
  std::vector<uint32_t> sequence() const;
  std::vector<uint32_t> tensor_sequence() const;
  // Stream stamps: the sequence number (1 for the first launch, 0 for none)
  // of the last launch whose kernel the GPU has begun, and ended.
  uint64_t begun() const;
  uint64_t ended() const;
  // Each launch's CUPTI correlation ids, in launch order: the driver
  // call's and the runtime call's that made it (0: none). A kernel's
  // activity record names one of them.
  std::vector<std::pair<uint32_t, uint32_t>> correlations() const;
  // nullptr stops it.
  void SetListener(LaunchListener listener, void* context);
  // The execution id of launch `sequence_number` (1-based).
  uint32_t ExecutionIdOf(uint64_t sequence_number) const;

 private:
  LaunchObserver() = default;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TORCH_LAUNCH_OBSERVER_H_
