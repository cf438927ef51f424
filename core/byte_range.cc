#include "core/byte_range.h"

#include <algorithm>

namespace umlab {

std::vector<ByteRange> MergedRanges(std::vector<ByteRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::vector<ByteRange> merged;
  for (const ByteRange& range : ranges) {
    if (range.end <= range.begin) continue;
    if (!merged.empty() && range.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, range.end);
    } else {
      merged.push_back(range);
    }
  }
  return merged;
}

std::vector<ByteRange> ClippedRanges(const std::vector<ByteRange>& ranges, ByteRange bounds) {
  std::vector<ByteRange> clipped;
  for (const ByteRange& range : ranges) {
    const ByteRange inside{std::max(range.begin, bounds.begin), std::min(range.end, bounds.end)};
    if (inside.end > inside.begin) clipped.push_back(inside);
  }
  return clipped;
}

}  // namespace umlab
