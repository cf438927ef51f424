// How PyTorch's foreach ops (torch._foreach_*, what Adam and SGD run by
// default on CUDA) split their tensor lists into kernel launches:
// ATen/native/cuda/MultiTensorApply.cuh's multi_tensor_apply.
//
// A foreach op walks its lists tensor by tensor in chunks of 65,536
// elements, one thread block per chunk, and launches a kernel whenever the
// launch's metadata is full: 320 chunks, or as many tensors as its depth
// allows (110, 64, 48, 36, 30 for 1-5 lists; 96 for one list with a list of
// scalars, as `_foreach_div_(tensors, scalars)`), and finally once for what
// is left. A tensor cut by a full launch continues in the next one. So
// GPT-2 small's 148 parameters (124 M elements, ~1,970 chunks) take 7
// launches per foreach op, and ResNet-50's 161 small ones 2 to 4, as the
// profiler shows on PyTorch 2.11 (docs/workloads.md).
#ifndef UMLAB_WORKLOADS_DNN_MULTI_TENSOR_APPLY_H_
#define UMLAB_WORKLOADS_DNN_MULTI_TENSOR_APPLY_H_

#include <cstdint>
#include <vector>

namespace umlab {

inline constexpr uint64_t kForeachChunkElements = 65536;

// Part of one tensor that one launch covers: chunks [first_chunk, end_chunk)
// of the tensor at `index` in the lists.
struct ForeachSegment {
  int index = 0;
  uint64_t first_chunk = 0;
  uint64_t end_chunk = 0;
};
using ForeachLaunch = std::vector<ForeachSegment>;

// The launches of one foreach op over tensors of `elements` each (empty
// tensors are skipped, as PyTorch does), with `depth` lists (1-5) and a
// scalar list or not.
std::vector<ForeachLaunch> MultiTensorLaunches(const std::vector<uint64_t>& elements, int depth,
                                               bool scalar_list);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_MULTI_TENSOR_APPLY_H_
