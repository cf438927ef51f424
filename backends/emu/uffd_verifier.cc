#include "backends/emu/uffd_verifier.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace umlab {
namespace {

constexpr int kWords = static_cast<int>(kPageSize / sizeof(uint64_t));

}  // namespace

UffdVerifier::UffdVerifier(bool check, uint64_t max_slots)
    : check_(check), max_slots_(max_slots), slot_tags_(new std::unique_ptr<SlotTags>[max_slots]) {}

void UffdVerifier::AddSlots(uint64_t slots) {
  for (slots = std::min(slots, max_slots_); slots_ < slots; ++slots_) {
    slot_tags_[slots_] = std::make_unique<SlotTags>();
  }
}

void UffdVerifier::MarkGarbage(uint64_t page) { Tag(page).garbage = 1; }

void UffdVerifier::MarkFresh(uint64_t page) {
  PageTag& tag = Tag(page);
  tag.committed = 0;
  tag.origin = kOwnAddress;
  tag.garbage = 1;
  shadows_.erase(page);
}

void UffdVerifier::BeginWrite(uint64_t page, uint32_t kernel) { Tag(page).pending = kernel; }

void UffdVerifier::CommitWrite(uint64_t page, uint32_t kernel) {
  PageTag& tag = Tag(page);
  if (tag.pending != kernel) return;
  tag.committed = kernel;
  tag.origin = kOwnAddress;
  tag.garbage = 0;
  shadows_.erase(page);
}

UffdVerifier::Words UffdVerifier::Expected(uint64_t page, uint64_t address) const {
  if (auto shadow = shadows_.find(page); shadow != shadows_.end()) return *shadow->second;
  Words words;
  const uint64_t origin = OriginOf(page, address);
  const uint32_t committed = Tag(page).committed;
  for (int w = 0; w < kWords; ++w) words[w] = Value(origin, w, committed);
  return words;
}

void UffdVerifier::Copy(uint64_t destination, uint64_t source, uint64_t bytes,
                        absl::FunctionRef<uint64_t(uint64_t address)> device_page_of) {
  const uint64_t delta = source - destination;  // modulo 2^64: source = destination + delta
  const uint64_t end = destination + bytes;
  for (uint64_t page_address = destination / kPageSize * kPageSize; page_address < end;
       page_address += kPageSize) {
    const uint64_t page = device_page_of(page_address);
    const uint64_t first = std::max(destination, page_address) - page_address;
    const uint64_t last = std::min(end, page_address + kPageSize) - page_address;
    if (first == 0 && last == kPageSize && (source - destination) % kPageSize == 0) {
      // The whole page, from one source page at the same offset: its tags.
      const uint64_t from_address = page_address + delta;
      const uint64_t from = device_page_of(from_address);
      PageTag& tag = Tag(page);
      tag.committed = Tag(from).committed;
      tag.origin = OriginOf(from, from_address);
      tag.garbage = Tag(from).garbage;
      if (auto shadow = shadows_.find(from); shadow != shadows_.end()) {
        shadows_[page] = std::make_unique<Words>(*shadow->second);
      } else {
        shadows_.erase(page);
      }
      continue;
    }
    // In part, or shifted: byte by byte from the source pages' words.
    Words words = Expected(page, page_address);
    auto* out = reinterpret_cast<unsigned char*>(words.data());
    bool source_garbage = false;
    uint64_t cached_address = kOwnAddress;
    Words cached{};
    for (uint64_t b = first; b < last; ++b) {
      const uint64_t from_byte = page_address + b + delta;
      const uint64_t from_address = from_byte / kPageSize * kPageSize;
      if (from_address != cached_address) {
        const uint64_t from = device_page_of(from_address);
        cached = Expected(from, from_address);
        source_garbage = source_garbage || Tag(from).garbage != 0;
        cached_address = from_address;
      }
      out[b] = reinterpret_cast<const unsigned char*>(cached.data())[from_byte - from_address];
    }
    // Zero stays acceptable where either side's bytes may have been dropped.
    Tag(page).garbage = Tag(page).garbage != 0 || source_garbage ? 1 : 0;
    shadows_[page] = std::make_unique<Words>(words);
  }
}

uint64_t UffdVerifier::Value(uint64_t address, int word, uint32_t version) {
  if (version == 0) return 0;
  // A splitmix64 finaliser: neighbouring words, pages and versions give
  // unrelated values, so a misplaced page or a stale copy cannot pass.
  uint64_t x = (address + static_cast<uint64_t>(word) * 8) ^
               (static_cast<uint64_t>(version) << 40) ^ 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;
}

void UffdVerifier::WritePage(uint64_t* words, uint64_t address, uint32_t kernel) const {
  for (int w = 0; w < kWords; ++w) {
    __atomic_store_n(&words[w], Value(address, w, kernel), __ATOMIC_RELAXED);
  }
}

void UffdVerifier::ReadPage(const uint64_t* words, uint64_t address, uint64_t page,
                            uint32_t kernel) {
  if (!check_) {
    (void)__atomic_load_n(&words[0], __ATOMIC_RELAXED);  // the touch is what matters
    return;
  }
  const PageTag& tag = Tag(page);
  const uint32_t committed = tag.committed;
  const bool written_now = tag.pending == kernel;
  auto shadow = shadows_.find(page);
  const Words* expected = shadow == shadows_.end() ? nullptr : shadow->second.get();
  // A copied page's zeroes are blank unless the bytes may have been dropped.
  const bool zero_ok = (committed == 0 && expected == nullptr) || tag.garbage != 0;
  const uint64_t origin = OriginOf(page, address);
  const auto expected_word = [&](int w) {
    return expected != nullptr ? (*expected)[w] : Value(origin, w, committed);
  };
  int bad = 0, zeroes = 0, first_bad = -1;
  uint64_t seen = 0;
  for (int w = 0; w < kWords; ++w) {
    const uint64_t value = __atomic_load_n(&words[w], __ATOMIC_RELAXED);
    if (value == 0) ++zeroes;
    if (value == expected_word(w)) continue;
    if (written_now && value == Value(address, w, kernel)) continue;
    if (value == 0 && zero_ok) continue;
    if (bad++ == 0) {
      first_bad = w;
      seen = value;
    }
  }
  pages_checked_.fetch_add(1, std::memory_order_relaxed);
  if (zeroes == kWords && committed != 0) zeroed_pages_.fetch_add(1, std::memory_order_relaxed);
  if (bad == 0) return;
  if (corrupted_.fetch_add(bad) == 0) {
    absl::MutexLock lock(&error_mu_);
    first_error_ = absl::StrFormat(
        "address %#x: read %#x in kernel %d, expected %#x (written by kernel %d)%s",
        address + first_bad * 8, seen, kernel, expected_word(first_bad), committed,
        written_now ? " or this kernel's value" : "");
  }
}

std::string UffdVerifier::first_error() const {
  absl::MutexLock lock(&error_mu_);
  return first_error_;
}

}  // namespace umlab
