// What every page of the uffd device should hold, so that every read can be
// checked.
//
// A write to a page stores, in each of its 512 words, a value derived from
// (page address, word, version), where the version is the number of the
// kernel launch that wrote it (so it differs per tensor, element and
// iteration). The verifier keeps each page's committed version; a reader
// accepts a word if it equals
//   - the committed version's value (0 for a page never written: zeroes),
//   - the value of the running kernel, if this kernel writes the page (SMs
//     may read and write one page concurrently, as an in-place kernel does),
//   - zero, if the program said the bytes are garbage (deactivated or
//     freed), since the engine may drop such pages instead of writing them
//     back and the next touch then populates zeroes.
// A program's copy (kCopy) gives its destination the source's content as
// it was when the copy was issued (Copy): a page the copy covers whole, at
// the same offset in its page, takes the source page's version and the
// address its values derive from (its origin); any other page the copy
// touches gets its expected words spelt out (a shadow page). So a read of a
// copy's destination before the copy's bytes are there (a blank page, or
// the bytes from before the copy) is a corrupted word.
// Anything else is a corrupted word. Words are checked one by one with
// relaxed atomic loads, so a page written by another SM mid-read is fine.
//
// The tables grow with the device's slots, one block's pages at a time, and
// a slot's tags never move once made: a migration may give a block its slot
// in the middle of a kernel (UffdBackend::SlotOrFail), while SM threads read
// the tags of other slots. (They were vectors, and a resize under a reading
// SM was a use after free, seen as a rare segfault in ReadPage.) During a
// kernel the tags are read by SM threads and written by nobody.
#ifndef UMLAB_BACKENDS_EMU_UFFD_VERIFIER_H_
#define UMLAB_BACKENDS_EMU_UFFD_VERIFIER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "core/memory_units.h"

namespace umlab {

class UffdVerifier {
 public:
  // `check` false: writes still store their values, reads only touch.
  // `max_slots`: the most slots the device will have (its max_blocks).
  UffdVerifier(bool check, uint64_t max_slots);

  // Device page index: slot * 512 + page in slot. Makes the tags of slots
  // up to `slots`; the caller orders this before any use of the new slots.
  void AddSlots(uint64_t slots);

  // Program semantics (between kernels).
  void MarkGarbage(uint64_t device_page);   // deactivated / freed: zero also OK
  void MarkFresh(uint64_t device_page);     // allocated: zeroes expected
  void BeginWrite(uint64_t device_page, uint32_t kernel);  // kernel will write it
  void CommitWrite(uint64_t device_page, uint32_t kernel);
  // A copy of `bytes` from program address `source` to `destination`, as
  // issued: every destination page should hold the source's content from
  // now on (where the copy covers it). `device_page_of` gives the device
  // page of a program address's page.
  void Copy(uint64_t destination, uint64_t source, uint64_t bytes,
            absl::FunctionRef<uint64_t(uint64_t address)> device_page_of);

  // On SM threads, during kernel `kernel`. `address` is the program byte
  // address of the page (what the value derives from).
  void WritePage(uint64_t* words, uint64_t address, uint32_t kernel) const;
  void ReadPage(const uint64_t* words, uint64_t address, uint64_t device_page,
                uint32_t kernel);

  static uint64_t Value(uint64_t address, int word, uint32_t version);

  uint64_t pages_checked() const { return pages_checked_.load(); }
  uint64_t corrupted_words() const { return corrupted_.load(); }
  // Reads of a page that held data and came back all zero: dropped bytes.
  uint64_t zeroed_pages_read() const { return zeroed_pages_.load(); }
  std::string first_error() const;

 private:
  using Words = std::array<uint64_t, kPageSize / sizeof(uint64_t)>;
  static constexpr uint64_t kOwnAddress = ~uint64_t{0};
  // The words page `device_page` (program address `address`) should hold.
  Words Expected(uint64_t device_page, uint64_t address) const;
  // What the verifier knows of one device page.
  struct PageTag {
    // The program page address its committed values derive from, when a
    // copy brought them from another page (kOwnAddress: its own).
    uint64_t origin = kOwnAddress;
    uint32_t committed = 0;  // the version the page holds (0: zeroes)
    uint32_t pending = 0;    // the kernel that writes it next
    uint8_t garbage = 0;     // zeroes are fine too (see the top)
  };
  using SlotTags = std::array<PageTag, kPagesPerBlock>;
  PageTag& Tag(uint64_t device_page) {
    return (*slot_tags_[device_page / kPagesPerBlock])[device_page % kPagesPerBlock];
  }
  const PageTag& Tag(uint64_t device_page) const {
    return (*slot_tags_[device_page / kPagesPerBlock])[device_page % kPagesPerBlock];
  }
  // The address the committed version's values derive from.
  uint64_t OriginOf(uint64_t device_page, uint64_t address) const {
    const uint64_t origin = Tag(device_page).origin;
    return origin == kOwnAddress ? address : origin;
  }

  bool check_;
  uint64_t max_slots_;
  uint64_t slots_ = 0;
  // One table per slot, made by AddSlots; the array of them never moves.
  std::unique_ptr<std::unique_ptr<SlotTags>[]> slot_tags_;
  // Pages a copy covered in part or at another offset: their words.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Words>> shadows_;
  std::atomic<uint64_t> pages_checked_{0};
  std::atomic<uint64_t> corrupted_{0};
  std::atomic<uint64_t> zeroed_pages_{0};
  mutable absl::Mutex error_mu_;
  std::string first_error_ ABSL_GUARDED_BY(error_mu_);
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_VERIFIER_H_
