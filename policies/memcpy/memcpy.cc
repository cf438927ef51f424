#include "policies/memcpy/memcpy.h"

#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "core/block_range.h"
#include "core/byte_size.h"

namespace umlab {

absl::Status MemcpyPolicy::Plan(const PlanInput& input) {
  maps_on_ = input.program.tensors_open_with;
  // Every block a buffer ever spans holds a frame from its allocation on.
  absl::flat_hash_set<BlockNumber> blocks;
  for (const IterationGraph& iteration : input.program.iterations) {
    for (const GraphTensor& tensor : iteration.tensors) {
      ForEachBlockRange(tensor.address, tensor.size, false,
                        [&](BlockNumber block, const PageMask&) { blocks.insert(block); });
    }
  }
  const uint64_t needed = blocks.size() * kBlockSize;
  if (needed > input.capacity_bytes) {
    return PolicyRefusal(absl::StrFormat(
        "memcpy: the program's buffers span %s of 2 MB blocks, more than the %s of device "
        "memory, where cudaMalloc would fail: give it --capacity=1 or more",
        FormatBytes(needed), FormatBytes(input.capacity_bytes)));
  }
  return absl::OkStatus();
}

void MemcpyPolicy::OnAllocatorEvent(const Event& event) {
  if (event.kind != maps_on_) return;
  ForEachBlockRange(event.address, event.size, false,
                    [&](BlockNumber block, const PageMask& pages) {
                      context().Populate(block, pages);
                    });
}

UMLAB_REGISTER_POLICY(
    memcpy,
    {"memcpy",
     "the program as written for device memory (HUM's baseline, the thesis's CUDA): buffers "
     "mapped when allocated and never evicted, copies as DMA at the link's copy rate; refuses "
     "a program whose buffers do not fit",
     {},
     [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<MemcpyPolicy>();
     }});

}  // namespace umlab
