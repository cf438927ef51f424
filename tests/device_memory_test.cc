// The device page table: frame limit, access bits, and the runs of mapped
// pages the sim's bulk path relies on.
#include "emu/device_memory.h"

#include <gtest/gtest.h>

namespace umlab {
namespace {

PageNumber Page(BlockNumber block, int index) { return block * kPagesPerBlock + index; }

TEST(DeviceMemoryTest, FramesAreAHardLimit) {
  DeviceMemory memory(1);
  ASSERT_TRUE(memory.Map(3, PageRangeMask(0, 4), PageMask()).ok());
  EXPECT_TRUE(memory.Map(3, PageRangeMask(4, 4), PageMask()).ok());  // same frame
  EXPECT_FALSE(memory.Map(4, PageRangeMask(0, 1), PageMask()).ok());
  memory.Unmap(3, PageRangeMask(0, 8));
  EXPECT_EQ(memory.used_frames(), 0u);
  EXPECT_TRUE(memory.Map(4, PageRangeMask(0, 1), PageMask()).ok());
  EXPECT_EQ(memory.peak_frames(), 1u);
}

TEST(DeviceMemoryTest, AccessRecordsTouchedAndWrittenPages) {
  DeviceMemory memory(2);
  ASSERT_TRUE(memory.Map(0, PageRangeMask(0, 8), PageRangeMask(7, 1)).ok());
  EXPECT_TRUE(memory.Access(Page(0, 1), /*write=*/false));
  EXPECT_TRUE(memory.Access(Page(0, 2), /*write=*/true));
  EXPECT_FALSE(memory.Access(Page(0, 8), /*write=*/false));  // not mapped
  EXPECT_FALSE(memory.Access(Page(1, 0), /*write=*/false));  // no frame
  const PageUse use = memory.Use(0);
  EXPECT_EQ(use.accessed, PageRangeMask(1, 2));
  EXPECT_EQ(use.dirty, PageRangeMask(2, 1) | PageRangeMask(7, 1));  // 7: zero-filled
}

TEST(DeviceMemoryTest, MappedRunStopsAtAHoleTheBlockEndOrSixtyFourPages) {
  DeviceMemory memory(2);
  ASSERT_TRUE(memory.Map(0, PageRangeMask(10, 20) | PageRangeMask(100, 412), PageMask()).ok());
  EXPECT_EQ(memory.MappedRun(Page(0, 10), 100), 20u);  // the hole at 30
  EXPECT_EQ(memory.MappedRun(Page(0, 15), 3), 3u);     // the caller's limit
  EXPECT_EQ(memory.MappedRun(Page(0, 30), 100), 0u);   // starts in the hole
  EXPECT_EQ(memory.MappedRun(Page(0, 100), 1000), 64u);
  EXPECT_EQ(memory.MappedRun(Page(0, 500), 1000), 12u);  // the block ends at 512
  EXPECT_EQ(memory.MappedRun(Page(1, 0), 10), 0u);        // no frame
  // Nothing is recorded until the caller says how many it consumed.
  EXPECT_TRUE(memory.Use(0).accessed.none());
  memory.RecordAccesses(Page(0, 12), 5, /*write=*/true);
  memory.RecordAccesses(Page(0, 100), 2, /*write=*/false);
  EXPECT_EQ(memory.Use(0).accessed, PageRangeMask(12, 5) | PageRangeMask(100, 2));
  EXPECT_EQ(memory.Use(0).dirty, PageRangeMask(12, 5));
}

}  // namespace
}  // namespace umlab
