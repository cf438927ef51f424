#include "policies/g10/g10_deepum.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "core/block_range.h"
#include "policies/g10/tensor_moves.h"

namespace umlab {

absl::Status G10DeepUmPolicy::Plan(const PlanInput& input) {
  plans_.Build(input.program, [](const IterationGraph& iteration) {
    KernelLookahead plan;
    plan.tensors = iteration.tensors;
    for (const GraphKernel& kernel : iteration.kernels) {
      std::vector<uint32_t>& uses = plan.uses.emplace_back();
      std::set_union(kernel.reads.begin(), kernel.reads.end(), kernel.writes.begin(),
                     kernel.writes.end(), std::back_inserter(uses));
    }
    return plan;
  });
  return absl::OkStatus();
}

void G10DeepUmPolicy::OnKernelBegin(uint32_t /*exec_id*/) {
  const auto [plan, kernel] = plans_.NextKernel();
  if (plan == nullptr) return;
  const size_t kernels = plan->kernels();
  window_.clear();
  for (int offset = 0; offset < degree_; ++offset) {
    for (uint32_t t : plan->uses[(kernel + static_cast<size_t>(offset)) % kernels]) {
      const GraphTensor& tensor = plan->tensors[t];
      ForEachBlockRange(tensor.address, tensor.size, /*whole_pages_only=*/false,
                        [&](BlockNumber block, const PageMask&) { window_.insert(block); });
    }
  }
  // The kernel `degree_` ahead wraps into the next iteration, which runs
  // the same kernels.
  for (uint32_t t : plan->uses[(kernel + static_cast<size_t>(degree_)) % kernels]) {
    ++tensors_prefetched_;
    PrefetchTensor(context(), plan->tensors[t].address, plan->tensors[t].size,
                   /*populate=*/true);
  }
}

std::optional<BlockNumber> G10DeepUmPolicy::ChooseVictim(const VictimQuery& query) {
  if (query.reason == VictimReason::kFault) return Policy::ChooseVictim(query);
  std::optional<BlockNumber> victim = context().memory().LeastRecentlyMigrated(
      [&](const BlockState& block) { return !window_.contains(block.number); }, query.for_block);
  if (!victim.has_value()) ++window_refusals_;
  return victim;
}

void G10DeepUmPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("plans", plans_.distinct());
  out.AddCount("tensors_prefetched", tensors_prefetched_);
  out.AddCount("window_refusals", window_refusals_);
  out.AddCount("kernels_unplanned", plans_.unplanned_kernels());
}

UMLAB_REGISTER_POLICY(
    g10_deepum,
    {"g10-deepum",
     "DeepUM as G10 (MICRO '23) models it: an oracle prefetches the tensors of the kernel "
     "`degree` ahead, prefetch evictions spare the running window, dead tensors are dropped",
     {{"degree", ParamType::kInt, "8",
       "kernels ahead whose tensors are prefetched, and the running window's length (G10's "
       "prefetch_degree)",
       ParamRange::Closed(1, 4096)}},
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<G10DeepUmPolicy>(static_cast<int>(params.Int("degree")));
     }});

}  // namespace umlab
