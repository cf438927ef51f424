// A range of bytes of the unified address space, and the union of several.
#ifndef UMLAB_CORE_BYTE_RANGE_H_
#define UMLAB_CORE_BYTE_RANGE_H_

#include <cstdint>
#include <vector>

namespace umlab {

// The bytes [begin, end).
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t size() const { return end > begin ? end - begin : 0; }
  bool operator==(const ByteRange&) const = default;
};

// `ranges` sorted by start and merged where they overlap or touch; empty
// ranges are dropped. The union, as disjoint ranges in address order.
std::vector<ByteRange> MergedRanges(std::vector<ByteRange> ranges);

// The ranges clipped to `bounds`; those outside it are dropped.
std::vector<ByteRange> ClippedRanges(const std::vector<ByteRange>& ranges, ByteRange bounds);

}  // namespace umlab

#endif  // UMLAB_CORE_BYTE_RANGE_H_
