#include "backends/cuda/page_write_counts.h"

namespace umlab::cuda {

void PageWriteCounts::Written(PageNumber first_page, uint64_t pages) {
  for (PageNumber page = first_page; page < first_page + pages; ++page) {
    uint32_t& count = counts_[page];
    if (count != kUnknown) ++count;
  }
}

void PageWriteCounts::Dropped(uint64_t address, uint64_t size) {
  if (size == 0) return;
  const PageNumber first = PageOfAddress(address);
  for (PageNumber page = first; page < first + PagesSpanned(address, size); ++page) {
    counts_[page] = kUnknown;
  }
}

std::optional<uint32_t> PageWriteCounts::Expected(PageNumber page) const {
  auto it = counts_.find(page);
  if (it == counts_.end()) return 0;
  if (it->second == kUnknown) return std::nullopt;
  return it->second;
}

}  // namespace umlab::cuda
