#include "policies/light_params_remote/light_params_remote.h"

#include <memory>
#include <vector>

#include "core/block_range.h"

namespace umlab {

absl::Status LightParamsRemotePolicy::Plan(const PlanInput& input) {
  plans_.Build(input.program, [](const IterationGraph& iteration) {
    std::vector<bool> reread(iteration.tensors.size(), false);
    for (const GraphKernel& kernel : iteration.kernels) {
      for (uint32_t t : kernel.reread) reread[t] = true;
    }
    LightPages plan;
    plan.kernel_count = iteration.kernels.size();
    for (size_t t = 0; t < iteration.tensors.size(); ++t) {
      const GraphTensor& tensor = iteration.tensors[t];
      if (tensor.role != TensorRole::kParameter) continue;
      (reread[t] ? plan.reread_bytes : plan.light_bytes) += tensor.size;
      if (reread[t]) continue;
      // Whole pages only: a page shared with a neighbour is the
      // neighbour's too, and may be reread.
      ForEachBlockRange(tensor.address, tensor.size, /*whole_pages_only=*/true,
                        [&](BlockNumber block, const PageMask& mask) {
                          plan.pages[block] |= mask;
                        });
    }
    return plan;
  });
  return absl::OkStatus();
}

void LightParamsRemotePolicy::OnIterationBegin(uint64_t iteration) {
  plans_.BeginIteration(iteration);
  marked_ = true;
  if (plans_.current() == nullptr) return;
  // Pages on the device stay there until evicted; the rest are mapped.
  for (const auto& [block, pages] : plans_.current()->pages) context().MapRemote(block, pages);
}

void LightParamsRemotePolicy::OnEvicted(BlockNumber block, const PageMask& pages) {
  const PageMask light = LightPagesOf(block) & pages;
  if (light.none()) return;
  eviction_mappings_ += light.count();
  context().MapRemote(block, light);
}

PageMask LightParamsRemotePolicy::MapRemotelyOnFault(BlockNumber block,
                                                     const PageMask& faulted) {
  const PageMask remote = LightPagesOf(block) & faulted;
  fault_mappings_ += remote.count();
  return remote;
}

PageMask LightParamsRemotePolicy::LightPagesOf(BlockNumber block) const {
  // Before the first marker the kernels initialise the parameters, once
  // each: that says nothing about how the training reads them.
  const LightPages* plan = marked_ ? plans_.current() : nullptr;
  if (plan == nullptr) return PageMask();
  auto it = plan->pages.find(block);
  return it == plan->pages.end() ? PageMask() : it->second;
}

void LightParamsRemotePolicy::ReportStats(PolicyStats& out) const {
  // The last iteration's plan: the steady one.
  const LightPages* last = plans_.last();
  out.AddCount("light_param_bytes", last == nullptr ? 0 : last->light_bytes);
  out.AddCount("reread_param_bytes", last == nullptr ? 0 : last->reread_bytes);
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
