#include "backends/emu/uffd_verifier.h"

#include "absl/strings/str_format.h"

namespace umlab {
namespace {

constexpr int kWords = static_cast<int>(kPageSize / sizeof(uint64_t));

}  // namespace

void UffdVerifier::AddSlots(uint64_t slots) {
  const size_t pages = slots * kPagesPerBlock;
  committed_.resize(pages, 0);
  pending_.resize(pages, 0);
  garbage_.resize(pages, 0);
}

void UffdVerifier::MarkGarbage(uint64_t page) { garbage_[page] = 1; }

void UffdVerifier::MarkFresh(uint64_t page) {
  committed_[page] = 0;
  garbage_[page] = 1;
}

void UffdVerifier::BeginWrite(uint64_t page, uint32_t kernel) { pending_[page] = kernel; }

void UffdVerifier::CommitWrite(uint64_t page, uint32_t kernel) {
  if (pending_[page] != kernel) return;
  committed_[page] = kernel;
  garbage_[page] = 0;
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
  const uint32_t committed = committed_[page];
  const bool written_now = pending_[page] == kernel;
  const bool zero_ok = committed == 0 || garbage_[page] != 0;
  int bad = 0, zeroes = 0, first_bad = -1;
  uint64_t seen = 0;
  for (int w = 0; w < kWords; ++w) {
    const uint64_t value = __atomic_load_n(&words[w], __ATOMIC_RELAXED);
    if (value == 0) ++zeroes;
    if (value == Value(address, w, committed)) continue;
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
        address + first_bad * 8, seen, kernel, Value(address, first_bad, committed), committed,
        written_now ? " or this kernel's value" : "");
  }
}

std::string UffdVerifier::first_error() const {
  absl::MutexLock lock(&error_mu_);
  return first_error_;
}

}  // namespace umlab
