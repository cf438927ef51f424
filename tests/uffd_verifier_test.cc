// The uffd device's verifier (backends/emu/uffd_verifier.h): it knows which
// words every page should hold, and its tags stay put while slots are added
// under SM threads that read them.
#include "backends/emu/uffd_verifier.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <thread>

namespace umlab::testing {
namespace {

constexpr uint64_t kAddress = uint64_t{1} << 32;
using Page = std::array<uint64_t, kPageSize / sizeof(uint64_t)>;

Page Written(uint32_t kernel) {
  Page page;
  UffdVerifier(false, 1).WritePage(page.data(), kAddress, kernel);
  return page;
}

TEST(UffdVerifier, AcceptsTheCommittedWriteAndFlagsAnOlderOne) {
  UffdVerifier verifier(true, 1);
  verifier.AddSlots(1);
  verifier.BeginWrite(0, 1);
  verifier.CommitWrite(0, 1);
  verifier.BeginWrite(0, 2);
  verifier.CommitWrite(0, 2);
  const Page current = Written(2);
  verifier.ReadPage(current.data(), kAddress, 0, 3);
  EXPECT_EQ(verifier.corrupted_words(), 0u);
  const Page stale = Written(1);
  verifier.ReadPage(stale.data(), kAddress, 0, 3);
  EXPECT_EQ(verifier.corrupted_words(), kPageSize / sizeof(uint64_t));
  EXPECT_EQ(verifier.pages_checked(), 2u);
}

TEST(UffdVerifier, ZeroesAreFineOnlyWhereTheBytesMayHaveBeenDropped) {
  UffdVerifier verifier(true, 1);
  verifier.AddSlots(1);
  verifier.BeginWrite(0, 1);
  verifier.CommitWrite(0, 1);
  const Page zeroes{};
  verifier.ReadPage(zeroes.data(), kAddress, 0, 2);
  EXPECT_GT(verifier.corrupted_words(), 0u);
  EXPECT_EQ(verifier.zeroed_pages_read(), 1u);
  UffdVerifier freed(true, 1);
  freed.AddSlots(1);
  freed.BeginWrite(0, 1);
  freed.CommitWrite(0, 1);
  freed.MarkGarbage(0);
  freed.ReadPage(zeroes.data(), kAddress, 0, 2);
  EXPECT_EQ(freed.corrupted_words(), 0u);
}

// A migration may give a block its slot mid-kernel (UffdBackend::SlotOrFail)
// while SMs read other slots' tags. Tags held in vectors moved under the
// readers when they grew: ThreadSanitizer reports that here, and in a Release
// build it was a rare segfault in UffdPolicies tests.
TEST(UffdVerifier, SlotsAddedWhileAnSmReadsLeaveItsTagsInPlace) {
  constexpr uint64_t kSlots = 2048;
  UffdVerifier verifier(true, kSlots);
  verifier.AddSlots(1);
  verifier.BeginWrite(0, 1);
  verifier.CommitWrite(0, 1);
  const Page page = Written(1);
  std::atomic<bool> stop{false};
  std::thread sm([&] {
    while (!stop.load()) verifier.ReadPage(page.data(), kAddress, 0, 2);
  });
  for (uint64_t slots = 2; slots <= kSlots; ++slots) verifier.AddSlots(slots);
  stop.store(true);
  sm.join();
  EXPECT_EQ(verifier.corrupted_words(), 0u);
  EXPECT_GT(verifier.pages_checked(), 0u);
}

}  // namespace
}  // namespace umlab::testing
