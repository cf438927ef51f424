#include "core/grid_program.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"

namespace umlab {
namespace {

std::vector<ByteRange> ToBytes(const std::vector<ElementRange>& elements, const GridArray& array,
                               uint32_t element_bytes) {
  const int64_t count = static_cast<int64_t>(array.bytes / element_bytes);
  std::vector<ByteRange> bytes;
  bytes.reserve(elements.size());
  for (const ElementRange& range : elements) {
    const int64_t begin = std::max<int64_t>(range.begin, 0);
    const int64_t end = std::min<int64_t>(range.end, count);
    if (end <= begin) continue;
    bytes.push_back({array.address + static_cast<uint64_t>(begin) * element_bytes,
                     array.address + static_cast<uint64_t>(end) * element_bytes});
  }
  return bytes;
}

int64_t ElementsPerPage(uint32_t element_bytes) {
  return static_cast<int64_t>(kPageSize / std::max<uint32_t>(1, element_bytes));
}

}  // namespace

bool GridKernel::uses_atomics() const {
  return std::any_of(accesses.begin(), accesses.end(),
                     [](const GridAccess& a) { return a.access == AccessType::kAtomic; });
}

uint64_t GridProgram::footprint_bytes() const {
  uint64_t bytes = 0;
  for (const GridArray& array : arrays) {
    bytes += (array.bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
  }
  return bytes;
}

absl::Status GridProgram::Validate() const {
  for (size_t i = 0; i < arrays.size(); ++i) {
    const GridArray& array = arrays[i];
    if (array.address % kBlockSize != 0 || array.bytes == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: array %s must be non-empty and start on a 2 MB boundary", name, array.name));
    }
    if (i > 0 && arrays[i - 1].address + arrays[i - 1].bytes > array.address) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: arrays %s and %s overlap or are out of address order", name,
                          arrays[i - 1].name, array.name));
    }
  }
  absl::flat_hash_map<uint32_t, std::string> names;
  for (const GridKernel& kernel : launches) {
    if (kernel.grid.Volume() == 0 || kernel.threads.Volume() == 0 || kernel.compute_ns < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: kernel %s needs a grid and a thread block of at least one, and a compute time", name,
          kernel.name));
    }
    auto [it, inserted] = names.try_emplace(kernel.exec_id, kernel.name);
    if (!inserted && it->second != kernel.name) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: kernels %s and %s share execution id %d", name, it->second,
                          kernel.name, kernel.exec_id));
    }
    for (const GridAccess& access : kernel.accesses) {
      if (access.array < 0 || access.array >= static_cast<int>(arrays.size()) ||
          access.element_bytes == 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: kernel %s accesses no array of the program", name, kernel.name));
      }
      if (!access.affine.has_value() && !access.touched) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: kernel %s has an access to %s with neither an affine index nor the bytes it "
            "touches",
            name, kernel.name, arrays[access.array].name));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<ByteRange> TouchedBytes(const GridProgram& program, const GridKernel& kernel,
                                    const GridAccess& access, const GridShare& blocks) {
  const GridArray& array = program.arrays[access.array];
  if (blocks.empty()) return {};
  if (access.touched) return MergedRanges(ClippedRanges(access.touched(blocks), array.range()));
  return ToBytes(TouchedElements(*access.affine, blocks, kernel.threads,
                                 ElementsPerPage(access.element_bytes)),
                 array, access.element_bytes);
}

std::optional<std::vector<ByteRange>> EstimatedBytes(const GridProgram& program,
                                                     const GridKernel& kernel,
                                                     const GridAccess& access,
                                                     const GridShare& blocks) {
  if (!access.affine.has_value()) return std::nullopt;
  const GridArray& array = program.arrays[access.array];
  return ToBytes(RepresentativeElements(*access.affine, blocks, kernel.threads,
                                        ElementsPerPage(access.element_bytes)),
                 array, access.element_bytes);
}

int GridArrayLayout::Add(std::string name, uint64_t bytes, bool copied_in, bool copied_out) {
  GridArray array;
  array.name = std::move(name);
  array.address = next_address_;
  array.bytes = bytes;
  array.copied_in = copied_in;
  array.copied_out = copied_out;
  next_address_ += (bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
  program_.arrays.push_back(std::move(array));
  return static_cast<int>(program_.arrays.size()) - 1;
}

PageMask PagesOfArray(const GridArray& array, BlockNumber block) {
  const uint64_t begin = block * kBlockSize, end = begin + kBlockSize;
  const uint64_t from = std::max(begin, array.address);
  const uint64_t to = std::min(end, array.address + array.bytes);
  if (to <= from) return PageMask();
  return PageRangeMask(PageIndexInBlock(PageOfAddress(from)),
                       static_cast<int>(PagesSpanned(from, to - from)));
}

PageMask PagesOfArrays(const GridProgram& program, BlockNumber block) {
  PageMask pages;
  for (const GridArray& array : program.arrays) pages |= PagesOfArray(array, block);
  return pages;
}

}  // namespace umlab
