#include "policies/memferry/gradient_placement.h"

#include <algorithm>
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

void GradientPlacement::Place(const IterationGraph& planned,
                              const std::vector<LayerGradients>& layers,
                              const std::vector<bool>& on_host) {
  const Touches touches = TouchesOf(planned);
  for (size_t l = 0; l < layers.size() && l < on_host.size(); ++l) {
    for (uint32_t t : layers[l].tensors) {
      const GraphTensor& tensor = planned.tensors[t];
      Gradient gradient{tensor.address, tensor.size, PageSet(), on_host[l]};
      gradient.pages.AddRange(tensor.address, tensor.size, /*whole_pages_only=*/true);
      if (gradient.pages.empty() || touches.first[t] == kNoKernel) continue;
      // The pages' earlier occupants in the iteration are those touched
      // before the gradient; it is awaited once the last of them has run
      // its last kernel.
      const uint64_t begin = (tensor.address + kPageSize - 1) / kPageSize * kPageSize;
      const uint64_t end = (tensor.address + tensor.size) / kPageSize * kPageSize;
      size_t await_after = kNoKernel;
      for (uint32_t o = 0; o < planned.tensors.size(); ++o) {
        if (o == t || touches.last[o] == kNoKernel || touches.last[o] >= touches.first[t] ||
            !Overlaps(planned.tensors[o], begin, end)) {
          continue;
        }
        if (await_after == kNoKernel || touches.last[o] > await_after) {
          await_after = touches.last[o];
        }
      }
      const size_t index = gradients_.size();
      if (await_after == kNoKernel) {
        await_from_start_.push_back(index);
      } else {
        await_after_kernel_[await_after].push_back(index);
      }
      gradients_.push_back(std::move(gradient));
    }
  }
}

void GradientPlacement::Discard(PolicyContext& context, const PageSet& pages) {
  for (const auto& [block, mask] : pages.blocks()) context.Discard(block, mask);
}

void GradientPlacement::Await(PolicyContext& context, size_t gradient) {
  const Gradient& g = gradients_[gradient];
  awaiting_[g.address] = gradient;
  if (!g.on_host) return;
  clearing_.Add(g.pages);
  freed_.Remove(g.pages);
  // What is free already goes now; what is still held goes when freed.
  Discard(context, g.pages);
}

void GradientPlacement::OnIterationBegin(PolicyContext& context, bool acting) {
  awaiting_.clear();
  clearing_ = PageSet();
  if (!acting) return;
  for (size_t gradient : await_from_start_) Await(context, gradient);
}

void GradientPlacement::OnKernelEnd(PolicyContext& context, size_t kernel) {
  if (auto it = await_after_kernel_.find(kernel); it != await_after_kernel_.end()) {
    for (size_t gradient : it->second) Await(context, gradient);
  }
  peak_bytes_on_device_ = std::max(peak_bytes_on_device_, BytesOnDevice(context));
}

uint64_t GradientPlacement::BytesOnDevice(const PolicyContext& context) const {
  uint64_t bytes = 0;
  for (const auto& [address, gradient] : live_) {
    for (const auto& [block, mask] : gradients_[gradient].pages.blocks()) {
      if (const BlockState* state = context.memory().Find(block); state != nullptr) {
        bytes += MaskBytes(mask & (state->resident | state->in_flight));
      }
    }
  }
  return bytes;
}

void GradientPlacement::Activate(PolicyContext& context, size_t gradient, bool acting) {
  const Gradient& g = gradients_[gradient];
  clearing_.Remove(g.pages);
  if (!acting) return;
  live_[g.address] = gradient;
  if (!g.on_host) return;
  for (const auto& [block, mask] : g.pages.blocks()) {
    const BlockState* state = context.memory().Find(block);
    const PageMask on_device =
        state == nullptr ? PageMask() : mask & (state->resident | state->in_flight);
    bytes_found_on_device_ += MaskBytes(on_device);
    if ((mask & ~on_device).any()) context.MapRemote(block, mask & ~on_device);
  }
  mapped_.Add(g.pages);
  ++gradients_mapped_;
}

void GradientPlacement::Deactivate(PolicyContext& context, size_t gradient) {
  const Gradient& g = gradients_[gradient];
  live_.erase(g.address);
  if (!g.on_host) return;
  // Its bytes are dead: the mapping goes, and so does the host's copy.
  Discard(context, g.pages);
  mapped_.Remove(g.pages);
  freed_.Add(g.pages);
}

void GradientPlacement::OnAllocatorEvent(PolicyContext& context, const Event& event,
                                         bool acting) {
  if (event.kind == EventKind::kActivate) {
    if (auto it = awaiting_.find(event.address);
        it != awaiting_.end() && gradients_[it->second].size == event.size) {
      const size_t gradient = it->second;
      awaiting_.erase(it);
      Activate(context, gradient, acting);
      return;
    }
    if (freed_.empty()) return;
    PageSet taken;
    taken.AddRange(event.address, event.size);
    for (const auto& [block, mask] : taken.blocks()) {
      const PageMask pages = mask & freed_.In(block);
      if (pages.any()) context.Populate(block, pages);
    }
    freed_.Remove(taken);
    return;
  }
  if (event.kind != EventKind::kDeactivate) return;
  if (auto it = live_.find(event.address);
      it != live_.end() && gradients_[it->second].size == event.size) {
    Deactivate(context, it->second);
    return;
  }
  if (clearing_.empty()) return;
  ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/true,
                    [&](BlockNumber block, const PageMask& pages) {
                      const PageMask freed = pages & clearing_.In(block);
                      if (freed.any()) context.Discard(block, freed);
                    });
}

PageMask GradientPlacement::MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) const {
  return faulted & mapped_.In(block);
}

}  // namespace umlab
