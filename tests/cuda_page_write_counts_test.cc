// What a host kernel on the cuda backend checks its reads against: the
// writes made to each page, until the program drops the page's bytes. Host
// code only, so it runs wherever the cuda backend is built.
#include <gtest/gtest.h>

#if __has_include("backends/cuda/page_write_counts.h")
#include "backends/cuda/page_write_counts.h"

namespace umlab::cuda {
namespace {

TEST(PageWriteCounts, APageNeverWrittenHoldsZero) {
  PageWriteCounts counts;
  EXPECT_EQ(counts.Expected(7), 0u);
}

TEST(PageWriteCounts, EachWriteAddsOne) {
  PageWriteCounts counts;
  counts.Written(10, 3);
  counts.Written(11, 1);
  EXPECT_EQ(counts.Expected(9), 0u);
  EXPECT_EQ(counts.Expected(10), 1u);
  EXPECT_EQ(counts.Expected(11), 2u);
  EXPECT_EQ(counts.Expected(12), 1u);
  EXPECT_EQ(counts.Expected(13), 0u);
}

TEST(PageWriteCounts, DroppedBytesAreUnknownForGoodEvenWhenWrittenAgain) {
  // A free of 100 bytes across the boundary of pages 2 and 3 drops both:
  // the driver may have discarded them, and a write after that adds one to
  // whatever they held.
  PageWriteCounts counts;
  counts.Written(1, 4);
  counts.Dropped(3 * kPageSize - 50, 100);
  EXPECT_EQ(counts.Expected(1), 1u);
  EXPECT_FALSE(counts.Expected(2).has_value());
  EXPECT_FALSE(counts.Expected(3).has_value());
  EXPECT_EQ(counts.Expected(4), 1u);
  counts.Written(2, 1);
  EXPECT_FALSE(counts.Expected(2).has_value());
}

}  // namespace
}  // namespace umlab::cuda

#else
TEST(PageWriteCounts, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
}
#endif
