// Walking a byte range block by block, as the engine and policies that
// think in tensors (G10's planner) both need.
#ifndef UMLAB_CORE_BLOCK_RANGE_H_
#define UMLAB_CORE_BLOCK_RANGE_H_

#include <algorithm>
#include <cstdint>

#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

// Calls fn(block, pages) for each block that [address, address+size) spans,
// with the pages of that block in the range: every page the range touches,
// or with `whole_pages_only` only the pages it covers whole. Activation uses
// the first (a page shared with a live tensor is live); deactivation the
// second, since invalidating a shared page would lose its neighbour's bytes.
template <typename Fn>
void ForEachBlockRange(uint64_t address, uint64_t size, bool whole_pages_only, Fn fn) {
  if (size == 0) return;
  uint64_t first = address / kPageSize;
  uint64_t end = (address + size + kPageSize - 1) / kPageSize;  // exclusive
  if (whole_pages_only) {
    first = (address + kPageSize - 1) / kPageSize;
    end = (address + size) / kPageSize;
  }
  for (uint64_t page = first; page < end;) {
    const BlockNumber block = BlockOfPage(page);
    const uint64_t block_end = FirstPageOfBlock(block + 1);
    const uint64_t stop = std::min(end, block_end);
    fn(block, PageRangeMask(PageIndexInBlock(page), static_cast<int>(stop - page)));
    page = stop;
  }
}

}  // namespace umlab

#endif  // UMLAB_CORE_BLOCK_RANGE_H_
