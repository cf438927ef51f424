// Pages, blocks and the units every layer counts in.
//
// The geometry is the UVM driver's: 4 KB pages grouped into 2 MB "VA blocks"
// of 512 pages. Blocks are the unit of device-frame allocation and eviction;
// pages are the unit of residency.
#ifndef UMLAB_CORE_MEMORY_UNITS_H_
#define UMLAB_CORE_MEMORY_UNITS_H_

#include <cstdint>
#include <limits>

namespace umlab {

inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kBlockSize = 2ull << 20;
inline constexpr int kPagesPerBlock = static_cast<int>(kBlockSize / kPageSize);

// A page number is a byte address divided by kPageSize; a block number is a
// byte address divided by kBlockSize. Both are plain integers so that they
// hash and compare cheaply in the simulator's hot loop.
using PageNumber = uint64_t;
using BlockNumber = uint64_t;

// Time is integer nanoseconds everywhere in the model. Virtual-time backends
// start at zero; real backends measure from the start of the run.
using Nanos = int64_t;
// A time that never comes: "no event pending".
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// The frame count of a device with no capacity limit (the `ideal` bound).
// Half the range, so that adding frame counts to it cannot overflow.
inline constexpr uint64_t kUnlimitedFrames = std::numeric_limits<uint64_t>::max() / 2;

constexpr BlockNumber BlockOfPage(PageNumber page) { return page / kPagesPerBlock; }
constexpr int PageIndexInBlock(PageNumber page) {
  return static_cast<int>(page % kPagesPerBlock);
}
constexpr PageNumber FirstPageOfBlock(BlockNumber block) {
  return block * kPagesPerBlock;
}
constexpr PageNumber PageOfAddress(uint64_t address) { return address / kPageSize; }
constexpr BlockNumber BlockOfAddress(uint64_t address) { return address / kBlockSize; }

// Number of pages that [address, address + size) touches.
constexpr uint64_t PagesSpanned(uint64_t address, uint64_t size) {
  if (size == 0) return 0;
  return PageOfAddress(address + size - 1) - PageOfAddress(address) + 1;
}

}  // namespace umlab

#endif  // UMLAB_CORE_MEMORY_UNITS_H_
