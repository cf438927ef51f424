#include "policies/light_params_remote/light_params_remote.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/block_range.h"

namespace umlab {

absl::Status LightParamsRemotePolicy::Plan(const PlanInput& input) {
  for (const IterationGraph& iteration : input.program.iterations) {
    std::vector<bool> reread(iteration.tensors.size(), false);
    for (const GraphKernel& kernel : iteration.kernels) {
      for (uint32_t t : kernel.reread) reread[t] = true;
    }
    // Kernels before the first marker graph as an iteration 0 of their
    // own, ahead of the marker's: the marker's plan replaces theirs.
    Pages& pages = plans_[iteration.index];
    pages.clear();
    light_bytes_ = heavy_bytes_ = 0;
    last_index_ = std::max(last_index_, iteration.index);
    for (size_t t = 0; t < iteration.tensors.size(); ++t) {
      const GraphTensor& tensor = iteration.tensors[t];
      if (tensor.role != TensorRole::kParameter) continue;
      (reread[t] ? heavy_bytes_ : light_bytes_) += tensor.size;
      if (reread[t]) continue;
      // Whole pages only: a page shared with a neighbour is the
      // neighbour's too, and may be reread.
      ForEachBlockRange(tensor.address, tensor.size, /*whole_pages_only=*/true,
                        [&](BlockNumber block, const PageMask& mask) { pages[block] |= mask; });
    }
  }
  return absl::OkStatus();
}

void LightParamsRemotePolicy::OnIterationBegin(uint64_t iteration) {
  // Past the last iteration graphed, the last one's plan holds.
  auto it = plans_.find(std::min(iteration, last_index_));
  current_ = it == plans_.end() ? nullptr : &it->second;
  if (current_ == nullptr) return;
  // Pages on the device stay there until evicted; the rest are mapped.
  for (const auto& [block, pages] : *current_) context().MapRemote(block, pages);
}

void LightParamsRemotePolicy::OnEvicted(BlockNumber block, const PageMask& pages) {
  if (current_ == nullptr) return;
  auto it = current_->find(block);
  if (it == current_->end()) return;
  const PageMask light = pages & it->second;
  if (light.none()) return;
  eviction_mappings_ += light.count();
  context().MapRemote(block, light);
}

PageMask LightParamsRemotePolicy::MapRemotelyOnFault(BlockNumber block,
                                                     const PageMask& faulted) {
  if (current_ == nullptr) return PageMask();
  auto it = current_->find(block);
  if (it == current_->end()) return PageMask();
  const PageMask remote = faulted & it->second;
  fault_mappings_ += remote.count();
  return remote;
}

void LightParamsRemotePolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("light_param_bytes", light_bytes_);
  out.AddCount("reread_param_bytes", heavy_bytes_);
  out.AddCount("pages_mapped_at_evictions", eviction_mappings_);
  out.AddCount("pages_mapped_at_faults", fault_mappings_);
}

UMLAB_REGISTER_POLICY(
    light_params_remote,
    {"light-params-remote",
     "maps the parameters no kernel rereads (layer norms, biases, embedding tables) for the "
     "device to read in host memory, and migrates everything else on demand: the smallest "
     "policy that mixes migration and remote mapping",
     {},
     [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<LightParamsRemotePolicy>();
     }});

}  // namespace umlab
