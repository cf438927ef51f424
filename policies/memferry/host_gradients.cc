#include "policies/memferry/host_gradients.h"

#include <utility>

#include "core/block_range.h"

namespace umlab {
namespace {

// The first and last kernel of the iteration that touch each tensor;
// kNoKernel for one no kernel touches.
struct Touches {
  std::vector<size_t> first;
  std::vector<size_t> last;
};

Touches TouchesOf(const IterationGraph& iteration) {
  Touches touches;
  touches.first.assign(iteration.tensors.size(), kNoKernel);
  touches.last.assign(iteration.tensors.size(), kNoKernel);
  for (size_t k = 0; k < iteration.kernels.size(); ++k) {
    for (const std::vector<uint32_t>* list : {&iteration.kernels[k].reads,
                                              &iteration.kernels[k].writes}) {
      for (uint32_t t : *list) {
        if (touches.first[t] == kNoKernel) touches.first[t] = k;
        touches.last[t] = k;
      }
    }
  }
  return touches;
}

bool Overlaps(const GraphTensor& tensor, uint64_t begin, uint64_t end) {
  return tensor.address < end && begin < tensor.address + tensor.size;
}

}  // namespace

void HostGradients::Place(const IterationGraph& planned, const std::vector<LayerGradients>& layers,
                          const std::vector<bool>& on_host) {
  const Touches touches = TouchesOf(planned);
  for (size_t l = 0; l < layers.size() && l < on_host.size(); ++l) {
    if (!on_host[l]) continue;
    for (uint32_t t : layers[l].tensors) {
      const GraphTensor& tensor = planned.tensors[t];
      Gradient gradient{tensor.address, tensor.size, PageSet()};
      gradient.pages.AddRange(tensor.address, tensor.size, /*whole_pages_only=*/true);
      if (gradient.pages.empty() || touches.first[t] == kNoKernel) continue;
      // The pages' earlier occupants in the iteration are those touched
      // before the gradient; the clearing starts once the last of them has
      // run its last kernel.
      const uint64_t begin = (tensor.address + kPageSize - 1) / kPageSize * kPageSize;
      const uint64_t end = (tensor.address + tensor.size) / kPageSize * kPageSize;
      size_t clear_after = kNoKernel;
      for (uint32_t o = 0; o < planned.tensors.size(); ++o) {
        if (o == t || touches.last[o] == kNoKernel || touches.last[o] >= touches.first[t] ||
            !Overlaps(planned.tensors[o], begin, end)) {
          continue;
        }
        if (clear_after == kNoKernel || touches.last[o] > clear_after) {
          clear_after = touches.last[o];
        }
      }
      const size_t index = gradients_.size();
      if (clear_after == kNoKernel) {
        clear_from_start_.push_back(index);
      } else {
        clear_after_kernel_[clear_after].push_back(index);
      }
      bytes_planned_ += gradient.pages.bytes();
      gradients_.push_back(std::move(gradient));
    }
  }
}

void HostGradients::Discard(PolicyContext& context, const PageSet& pages) {
  for (const auto& [block, mask] : pages.blocks()) context.Discard(block, mask);
}

void HostGradients::StartClearing(PolicyContext& context, size_t gradient) {
  const Gradient& g = gradients_[gradient];
  awaiting_[g.address] = gradient;
  clearing_.Add(g.pages);
  freed_.Remove(g.pages);
  // What is free already goes now; what is still held goes when freed.
  Discard(context, g.pages);
}

void HostGradients::OnIterationBegin(PolicyContext& context, bool acting) {
  awaiting_.clear();
  clearing_ = PageSet();
  if (!acting) return;
  for (size_t gradient : clear_from_start_) StartClearing(context, gradient);
}

void HostGradients::OnKernelEnd(PolicyContext& context, size_t kernel) {
  auto it = clear_after_kernel_.find(kernel);
  if (it == clear_after_kernel_.end()) return;
  for (size_t gradient : it->second) StartClearing(context, gradient);
}

void HostGradients::OnAllocatorEvent(PolicyContext& context, const Event& event, bool acting) {
  if (event.kind == EventKind::kActivate) {
    auto it = awaiting_.find(event.address);
    if (it == awaiting_.end() || gradients_[it->second].size != event.size) {
      if (freed_.empty()) return;
      PageSet now_held;
      now_held.AddRange(event.address, event.size);
      for (const auto& [block, mask] : now_held.blocks()) {
        const PageMask pages = mask & freed_.In(block);
        if (pages.any()) context.Populate(block, pages);
      }
      freed_.Remove(now_held);
      return;
    }
    const size_t gradient = it->second;
    awaiting_.erase(it);
    const Gradient& g = gradients_[gradient];
    clearing_.Remove(g.pages);
    if (!acting) return;
    for (const auto& [block, mask] : g.pages.blocks()) {
      const BlockState* state = context.memory().Find(block);
      const PageMask on_device =
          state == nullptr ? PageMask() : mask & (state->resident | state->in_flight);
      bytes_found_on_device_ += MaskBytes(on_device);
      if ((mask & ~on_device).any()) context.MapRemote(block, mask & ~on_device);
    }
    mapped_[g.address] = gradient;
    mapped_pages_.Add(g.pages);
    ++gradients_mapped_;
    return;
  }
  if (event.kind != EventKind::kDeactivate) return;
  if (auto it = mapped_.find(event.address);
      it != mapped_.end() && gradients_[it->second].size == event.size) {
    // Its bytes are dead: the mapping goes, and so does the host's copy.
    const Gradient& g = gradients_[it->second];
    Discard(context, g.pages);
    freed_.Add(g.pages);
    mapped_pages_.Remove(g.pages);
    mapped_.erase(it);
    return;
  }
  if (clearing_.empty()) return;
  ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/true,
                    [&](BlockNumber block, const PageMask& pages) {
                      const PageMask freed = pages & clearing_.In(block);
                      if (freed.any()) context.Discard(block, freed);
                    });
}

PageMask HostGradients::MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) const {
  return faulted & mapped_pages_.In(block);
}

}  // namespace umlab
