// A set of pages within one 2 MB block: one bit per 4 KB page.
#ifndef UMLAB_CORE_PAGE_MASK_H_
#define UMLAB_CORE_PAGE_MASK_H_

#include <bitset>
#include <cstdint>

#include "core/memory_units.h"

namespace umlab {

using PageMask = std::bitset<kPagesPerBlock>;
// A mask as 64-bit words, where one crosses threads or processes as atomics
// or raw bytes (the uffd device's page bits, the cluster's messages).
inline constexpr int kPageMaskWords = kPagesPerBlock / 64;

// The pages [first, first + count) of a block; the range is clipped to it.
inline PageMask PageRangeMask(int first, int count) {
  PageMask mask;
  if (first < 0) {
    count += first;
    first = 0;
  }
  if (count <= 0 || first >= kPagesPerBlock) return mask;
  if (first + count > kPagesPerBlock) count = kPagesPerBlock - first;
  if (count == kPagesPerBlock) return mask.set();
  mask.set();
  mask >>= (kPagesPerBlock - count);
  mask <<= first;
  return mask;
}

inline PageMask FullPageMask() { return PageMask().set(); }

inline uint64_t MaskBytes(const PageMask& mask) { return mask.count() * kPageSize; }

// Calls fn(first, count) for each run of consecutive set pages, in order:
// backends that move data with range calls issue one call per run.
template <typename Fn>
void ForEachPageRun(const PageMask& mask, Fn fn) {
  int page = 0;
  while (page < kPagesPerBlock) {
    if (!mask.test(page)) {
      ++page;
      continue;
    }
    const int first = page;
    while (page < kPagesPerBlock && mask.test(page)) ++page;
    fn(first, page - first);
  }
}

}  // namespace umlab

#endif  // UMLAB_CORE_PAGE_MASK_H_
