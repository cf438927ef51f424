// The pages one program access touches, and how many bytes of each: what a
// remote access (PolicyContext::MapRemote) moves over the link. Both the sim
// and the uffd backend charge a remote page the bytes the program's access
// touches on it, not the whole page, so they must cut accesses alike.
#ifndef UMLAB_CORE_ACCESS_SPAN_H_
#define UMLAB_CORE_ACCESS_SPAN_H_

#include <cstdint>

#include "core/memory_units.h"

namespace umlab {

struct AccessSpan {
  PageNumber first_page = 0;
  uint64_t pages = 0;
  // Bytes of the first page before the access starts, and bytes of the
  // last page it covers.
  uint32_t head_skip = 0;
  uint32_t tail_bytes = 0;
  // Further passes over the range after the first (Event::rereads: a
  // GEMM's weight), each of which a remote access moves again.
  uint32_t rereads = 0;

  // [address, address + size), size > 0.
  static constexpr AccessSpan Of(uint64_t address, uint64_t size, uint32_t rereads = 0) {
    const uint64_t end = address + size;
    return AccessSpan{PageOfAddress(address), PagesSpanned(address, size),
                      static_cast<uint32_t>(address % kPageSize),
                      static_cast<uint32_t>((end - 1) % kPageSize + 1), rereads};
  }

  // Bytes the access moves of its pages [offset, offset + count), every
  // pass counted.
  constexpr uint64_t BytesOf(uint64_t offset, uint64_t count) const {
    uint64_t bytes = count * kPageSize;
    if (offset == 0) bytes -= head_skip;
    if (offset + count == pages) bytes -= kPageSize - tail_bytes;
    return bytes * (uint64_t{rereads} + 1);
  }
};

}  // namespace umlab

#endif  // UMLAB_CORE_ACCESS_SPAN_H_
