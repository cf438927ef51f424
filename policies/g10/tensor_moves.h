// A tensor's moves, block by block through the PolicyContext: what the
// policies that plan in tensors (g10 and G10's baselines) ask of the engine.
// Drops and evictions take only the pages a tensor covers whole, so a page
// shared with a neighbour keeps its bytes; arrivals take every page it
// touches.
#ifndef UMLAB_POLICIES_G10_TENSOR_MOVES_H_
#define UMLAB_POLICIES_G10_TENSOR_MOVES_H_

#include <cstdint>

#include "core/block_range.h"
#include "core/policy.h"

namespace umlab {

// Drops the tensor's dead bytes (PolicyContext::Discard: pages the
// allocator holds free only).
inline void DiscardTensor(PolicyContext& context, uint64_t address, uint64_t size) {
  ForEachBlockRange(address, size, /*whole_pages_only=*/true,
                    [&](BlockNumber block, const PageMask& pages) {
                      context.Discard(block, pages);
                    });
}

inline void PreEvictTensor(PolicyContext& context, uint64_t address, uint64_t size,
                           MemoryTier tier) {
  ForEachBlockRange(address, size, /*whole_pages_only=*/true,
                    [&](BlockNumber block, const PageMask& pages) {
                      context.PreEvictPages(block, pages, tier);
                    });
}

// Pre-allocation: its pages that hold no data are populated in place.
inline void PopulateTensor(PolicyContext& context, uint64_t address, uint64_t size) {
  ForEachBlockRange(address, size, /*whole_pages_only=*/false,
                    [&](BlockNumber block, const PageMask& pages) {
                      context.Populate(block, pages);
                    });
}

// Its pages come back; with `populate`, those with no data are populated
// first, so they do not wait behind the copies.
inline void PrefetchTensor(PolicyContext& context, uint64_t address, uint64_t size,
                           bool populate = false) {
  ForEachBlockRange(address, size, /*whole_pages_only=*/false,
                    [&](BlockNumber block, const PageMask& pages) {
                      if (populate) context.Populate(block, pages);
                      context.Prefetch(block, pages, context.current_exec_id());
                    });
}

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_TENSOR_MOVES_H_
