// What the first word of each page of the replay's managed memory holds,
// so that a host kernel can check what the CPU reads.
//
// The replay writes a page by adding one to its first word: the replay
// kernel with an atomic add (replay_kernel.cu), a host kernel with a plain
// read-modify-write. Managed memory starts zeroed, so a page's first word is
// the number of writes made to it, in program order, as long as the program
// never dropped its bytes. After a free or a deactivation the engine may
// discard them (and the driver then gives back zeroes or anything), so what
// the page holds is not known from then on. A CPU that reads a different
// count saw stale data: a write-back or a migration to the host that never
// happened.
#ifndef UMLAB_BACKENDS_CUDA_PAGE_WRITE_COUNTS_H_
#define UMLAB_BACKENDS_CUDA_PAGE_WRITE_COUNTS_H_

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "core/memory_units.h"

namespace umlab::cuda {

class PageWriteCounts {
 public:
  // `pages` pages from `first_page` were written once more.
  void Written(PageNumber first_page, uint64_t pages);
  // The program dropped the bytes of [address, address + size): every page
  // it touches, even in part, is unknown from now on.
  void Dropped(uint64_t address, uint64_t size);
  // What the page's first word holds now, if that is known.
  std::optional<uint32_t> Expected(PageNumber page) const;

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  // Pages written or dropped; a page not here was never written: 0.
  absl::flat_hash_map<PageNumber, uint32_t> counts_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_PAGE_WRITE_COUNTS_H_
