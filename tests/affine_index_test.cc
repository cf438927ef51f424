// MAPA's affine accesses (core/affine_index.h) and what a grid program
// makes of them (core/grid_program.h): the exact elements a box of thread
// blocks touches, and SnuRHAC's estimate from representative threads.
#include "core/affine_index.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/grid_program.h"

namespace umlab {
namespace {

AffineTerm Term(IndexVariable variable, int64_t coefficient, uint64_t trips = 0) {
  return {variable, coefficient, trips};
}

GridShare Blocks(uint32_t first_x, uint32_t extent_x) {
  return GridShare{Dim3{first_x, 0, 0}, Dim3{extent_x, 1, 1}};
}

TEST(AffineIndexTest, ARowOfBlocksTouchesOneRange) {
  // f = 4 bx + tx, 4 threads: blocks 1 and 2 touch elements 4 .. 11.
  const AffineIndex index{0, {Term(IndexVariable::kBlockX, 4), Term(IndexVariable::kThreadX, 1)}};
  const std::vector<ElementRange> expected = {{4, 12}};
  EXPECT_EQ(TouchedElements(index, Blocks(1, 2), Dim3{4, 1, 1}, 1024), expected);
  EXPECT_EQ(RepresentativeElements(index, Blocks(1, 2), Dim3{4, 1, 1}, 1024), expected);
}

TEST(AffineIndexTest, AColumnIsStridedButItsEstimateIsAHull) {
  // gemm's B[k][j] in an 8 x 8 matrix: f = 8 k + 2 bx + tx, k < 8, 2
  // threads. Block 1 touches columns 2 and 3 of every row; its
  // representative threads (tx = 0, 1) at k = 0 and 7 bound 2 .. 59.
  const AffineIndex index{0,
                          {Term(IndexVariable::kLoop, 8, 8), Term(IndexVariable::kBlockX, 2),
                           Term(IndexVariable::kThreadX, 1)}};
  std::vector<ElementRange> column;
  for (int64_t k = 0; k < 8; ++k) column.push_back({8 * k + 2, 8 * k + 4});
  EXPECT_EQ(TouchedElements(index, Blocks(1, 1), Dim3{2, 1, 1}, 1024), column);
  EXPECT_EQ(RepresentativeElements(index, Blocks(1, 1), Dim3{2, 1, 1}, 1024),
            (std::vector<ElementRange>{{2, 60}}));
  // All four blocks of columns: the whole matrix, either way.
  EXPECT_EQ(TouchedElements(index, Blocks(0, 4), Dim3{2, 1, 1}, 1024),
            (std::vector<ElementRange>{{0, 64}}));
}

TEST(AffineIndexTest, NegativeCoefficientsAndConstantsShift) {
  // f = 10 - bx over blocks 0 .. 2: elements 8, 9, 10.
  const AffineIndex down{10, {Term(IndexVariable::kBlockX, -1)}};
  EXPECT_EQ(TouchedElements(down, Blocks(0, 3), Dim3{}, 1024),
            (std::vector<ElementRange>{{8, 11}}));
  // A halo before the array's start stays negative until it is clipped.
  const AffineIndex halo{-5, {Term(IndexVariable::kThreadX, 1)}};
  EXPECT_EQ(TouchedElements(halo, Blocks(0, 1), Dim3{10, 1, 1}, 1024),
            (std::vector<ElementRange>{{-5, 5}}));
  EXPECT_TRUE(TouchedElements(halo, Blocks(0, 0), Dim3{10, 1, 1}, 1024).empty());
}

TEST(AffineIndexTest, GridProgramsClipToTheArrayAndKeepIndirectTruths) {
  GridProgram program;
  program.name = "clip";
  GridArrayLayout layout(program);
  layout.Add("pad", 1, false, false);
  const int array = layout.Add("a", 16 * 4, false, false);
  ASSERT_EQ(program.arrays[array].address, kBlockSize);
  GridKernel kernel;
  kernel.threads = Dim3{8, 1, 1};
  GridAccess halo;
  halo.array = array;
  halo.affine = AffineIndex{-4, {Term(IndexVariable::kThreadX, 1)}};
  EXPECT_EQ(TouchedBytes(program, kernel, halo, Blocks(0, 1)),
            (std::vector<ByteRange>{{kBlockSize, kBlockSize + 16}}));
  EXPECT_EQ(*EstimatedBytes(program, kernel, halo, Blocks(0, 1)),
            (std::vector<ByteRange>{{kBlockSize, kBlockSize + 16}}));
  GridAccess indirect;
  indirect.array = array;
  indirect.touched = [](const GridShare&) {
    return std::vector<ByteRange>{{kBlockSize + 60, kBlockSize + 100}};
  };
  EXPECT_EQ(TouchedBytes(program, kernel, indirect, Blocks(0, 1)),
            (std::vector<ByteRange>{{kBlockSize + 60, kBlockSize + 64}}));
  EXPECT_FALSE(EstimatedBytes(program, kernel, indirect, Blocks(0, 1)).has_value());
}

}  // namespace
}  // namespace umlab
