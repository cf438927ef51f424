// A set of pages, block by block in address order: the pages a layer's
// parameters (or its gradients) occupy, which the memferry policy maps,
// copies and releases together. Tensors smaller than a page share pages (the allocator packs
// biases and norms), so sets of different layers can overlap and are
// combined page by page.
#ifndef UMLAB_POLICIES_MEMFERRY_PAGE_SET_H_
#define UMLAB_POLICIES_MEMFERRY_PAGE_SET_H_

#include <cstdint>
#include <map>

#include "core/block_range.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

class PageSet {
 public:
  // Every page [address, address + size) touches, or with
  // `whole_pages_only` the pages it covers entirely (those no other live
  // tensor can share).
  void AddRange(uint64_t address, uint64_t size, bool whole_pages_only = false) {
    ForEachBlockRange(address, size, whole_pages_only,
                      [&](BlockNumber block, const PageMask& pages) { blocks_[block] |= pages; });
  }
  void AddPages(BlockNumber block, const PageMask& pages) {
    if (pages.any()) blocks_[block] |= pages;
  }
  void Add(const PageSet& other) {
    for (const auto& [block, pages] : other.blocks_) blocks_[block] |= pages;
  }
  void Remove(const PageSet& other) {
    for (const auto& [block, pages] : other.blocks_) {
      auto it = blocks_.find(block);
      if (it == blocks_.end()) continue;
      it->second &= ~pages;
      if (it->second.none()) blocks_.erase(it);
    }
  }
  // The pages of `block` in the set (none if it has none).
  PageMask In(BlockNumber block) const {
    auto it = blocks_.find(block);
    return it == blocks_.end() ? PageMask() : it->second;
  }

  bool empty() const { return blocks_.empty(); }
  uint64_t bytes() const {
    uint64_t total = 0;
    for (const auto& [block, pages] : blocks_) total += MaskBytes(pages);
    return total;
  }
  // Block by block, in address order; never an empty mask.
  const std::map<BlockNumber, PageMask>& blocks() const { return blocks_; }

 private:
  std::map<BlockNumber, PageMask> blocks_;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_PAGE_SET_H_
