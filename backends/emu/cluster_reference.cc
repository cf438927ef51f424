#include "backends/emu/cluster_reference.h"

#include <algorithm>

namespace umlab {
namespace {

constexpr int32_t kNoData = -2;

}  // namespace

uint32_t WordValue(int kernel, uint64_t word) {
  // splitmix64 of (kernel, word): neighbouring words and kernels differ in
  // every bit, so a page copied from the wrong place or time shows.
  uint64_t x = (static_cast<uint64_t>(static_cast<uint32_t>(kernel + 2)) << 40) ^ word;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  const uint32_t value = static_cast<uint32_t>(x);
  return value == 0 ? 1 : value;
}

ClusterReference::ClusterReference(const GridProgram& program) : program_(program) {
  uint64_t end = 0;
  for (const GridArray& array : program.arrays) end = std::max(end, array.address + array.bytes);
  last_writer_.assign(EndWord(ByteRange{0, end}), kNoData);
  written_.assign(last_writer_.size(), false);
  for (const GridArray& array : program.arrays) {
    if (!array.copied_in) continue;
    std::fill(last_writer_.begin() + static_cast<int64_t>(FirstWord(array.range())),
              last_writer_.begin() + static_cast<int64_t>(EndWord(array.range())), kCopiedIn);
  }
}

uint32_t ClusterReference::Expected(uint64_t word) const {
  const int32_t writer = last_writer_[word];
  return writer == kNoData ? 0 : WordValue(writer, word);
}

bool ClusterReference::ReadAllowed(uint64_t word, uint32_t seen) const {
  if (seen == Expected(word)) return true;
  return written_[word] && seen == WordValue(current_, word);
}

void ClusterReference::BeginKernel(int index) {
  for (const ByteRange& range : written_ranges_) {
    std::fill(written_.begin() + static_cast<int64_t>(FirstWord(range)),
              written_.begin() + static_cast<int64_t>(EndWord(range)), false);
  }
  written_ranges_.clear();
  current_ = index;
  const GridKernel& kernel = program_.launches[index];
  const GridShare whole{Dim3{0, 0, 0}, kernel.grid};
  for (const GridAccess& access : kernel.accesses) {
    if (access.access == AccessType::kRead) continue;
    for (const ByteRange& range : TouchedBytes(program_, kernel, access, whole)) {
      std::fill(written_.begin() + static_cast<int64_t>(FirstWord(range)),
                written_.begin() + static_cast<int64_t>(EndWord(range)), true);
      written_ranges_.push_back(range);
    }
  }
}

void ClusterReference::EndKernel() {
  for (const ByteRange& range : written_ranges_) {
    std::fill(last_writer_.begin() + static_cast<int64_t>(FirstWord(range)),
              last_writer_.begin() + static_cast<int64_t>(EndWord(range)), current_);
  }
}

}  // namespace umlab
