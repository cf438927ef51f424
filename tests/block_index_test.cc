#include "core/block_index.h"

#include <iterator>

#include <gtest/gtest.h>

namespace umlab {
namespace {

TEST(BlockIndexTest, StoresAndFindsBlocksAcrossChunksAndFarApart) {
  BlockIndex index;
  const BlockNumber blocks[] = {0, 4095, 4096, 1234567, (uint64_t{1} << 40) + 7, 3};
  for (uint32_t i = 0; i < std::size(blocks); ++i) {
    EXPECT_EQ(index.Find(blocks[i]), BlockIndex::kAbsent);
    index.Slot(blocks[i]) = i;
  }
  for (uint32_t i = 0; i < std::size(blocks); ++i) EXPECT_EQ(index.Find(blocks[i]), i);
  // Neighbours in a chunk that exists are absent until stored.
  EXPECT_EQ(index.Find(1), BlockIndex::kAbsent);
  EXPECT_EQ(index.Find(4097), BlockIndex::kAbsent);
  EXPECT_EQ(index.Find(uint64_t{1} << 41), BlockIndex::kAbsent);
  // A slot is a stable reference to the stored index.
  index.Slot(4095) = 99;
  EXPECT_EQ(index.Find(4095), 99u);
}

}  // namespace
}  // namespace umlab
