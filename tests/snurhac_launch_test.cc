// What SnuRHAC decides at a kernel's launch: how the grid is split over the
// devices (DeepUM thesis §6.2) and whether the kernel runs on one device
// only (§6.4).
#include <vector>

#include <gtest/gtest.h>

#include "emu/snurhac/execution_mode.h"
#include "emu/snurhac/grid_split.h"

namespace umlab::snurhac {
namespace {

std::vector<uint32_t> ExtentsAlong(const GridSplit& split) {
  std::vector<uint32_t> extents;
  for (const GridShare& share : split.shares) {
    extents.push_back(split.axis == GridAxis::kZ   ? share.extent.z
                      : split.axis == GridAxis::kY ? share.extent.y
                                                   : share.extent.x);
  }
  return extents;
}

TEST(GridSplitTest, CutsAlongZWhenZHasABlockForEveryDevice) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{16, 16, 8}, 4);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->axis, GridAxis::kZ);
  EXPECT_EQ(ExtentsAlong(*split), (std::vector<uint32_t>{2, 2, 2, 2}));
  EXPECT_EQ(split->shares[3].first, (Dim3{0, 0, 6}));
  EXPECT_EQ(split->shares[3].extent, (Dim3{16, 16, 2}));
}

// Figure 6.2(a): a two-dimensional grid with enough rows is cut along y,
// keeping each row of x-adjacent blocks on one device.
TEST(GridSplitTest, TwoDimensionalGridIsCutAlongY) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{8, 4, 1}, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->axis, GridAxis::kY);
  for (int device = 0; device < 4; ++device) {
    EXPECT_EQ(split->shares[device].first, (Dim3{0, static_cast<uint32_t>(device), 0}));
    EXPECT_EQ(split->shares[device].extent, (Dim3{8, 1, 1}));
  }
}

TEST(GridSplitTest, FallsBackToYThenX) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{64, 8, 3}, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->axis, GridAxis::kY);
  split = SplitGrid(Dim3{64, 3, 3}, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->axis, GridAxis::kX);
  EXPECT_EQ(ExtentsAlong(*split), (std::vector<uint32_t>{16, 16, 16, 16}));
}

TEST(GridSplitTest, UnevenCutGivesTheExtraBlocksToTheFirstDevices) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{5, 10, 1}, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->axis, GridAxis::kY);
  EXPECT_EQ(ExtentsAlong(*split), (std::vector<uint32_t>{3, 3, 2, 2}));
  EXPECT_EQ(split->shares[2].first, (Dim3{0, 6, 0}));
  EXPECT_EQ(split->shares[3].first, (Dim3{0, 8, 0}));
}

TEST(GridSplitTest, TooFewBlocksLeaveTheLastDevicesIdle) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{3, 1, 1}, 4);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(split->axis, GridAxis::kX);
  EXPECT_EQ(ExtentsAlong(*split), (std::vector<uint32_t>{1, 1, 1, 0}));
  EXPECT_TRUE(split->shares[3].empty());
}

TEST(GridSplitTest, OneDeviceRunsTheWholeGrid) {
  absl::StatusOr<GridSplit> split = SplitGrid(Dim3{7, 5, 3}, 1);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->shares.size(), 1u);
  EXPECT_EQ(split->shares[0].first, (Dim3{0, 0, 0}));
  EXPECT_EQ(split->shares[0].extent, (Dim3{7, 5, 3}));
}

// Every block of every small grid lands in exactly one device's share.
TEST(GridSplitTest, SharesTileTheGridExactly) {
  for (uint32_t x = 1; x <= 5; ++x) {
    for (uint32_t y = 1; y <= 5; ++y) {
      for (uint32_t z = 1; z <= 5; ++z) {
        for (int devices = 1; devices <= 7; ++devices) {
          const Dim3 grid{x, y, z};
          absl::StatusOr<GridSplit> split = SplitGrid(grid, devices);
          ASSERT_TRUE(split.ok());
          ASSERT_EQ(split->shares.size(), static_cast<size_t>(devices));
          std::vector<int> owners(grid.Volume(), 0);
          for (const GridShare& share : split->shares) {
            for (uint32_t k = 0; k < share.extent.z; ++k) {
              for (uint32_t j = 0; j < share.extent.y; ++j) {
                for (uint32_t i = 0; i < share.extent.x; ++i) {
                  const uint32_t bx = share.first.x + i;
                  const uint32_t by = share.first.y + j;
                  const uint32_t bz = share.first.z + k;
                  ASSERT_TRUE(bx < x && by < y && bz < z);
                  ++owners[(bz * y + by) * x + bx];
                }
              }
            }
          }
          for (int count : owners) ASSERT_EQ(count, 1) << x << "x" << y << "x" << z << " on " << devices;
        }
      }
    }
  }
}

TEST(GridSplitTest, RejectsAnEmptyGridOrNoDevices) {
  EXPECT_FALSE(SplitGrid(Dim3{0, 1, 1}, 2).ok());
  EXPECT_FALSE(SplitGrid(Dim3{4, 4, 4}, 0).ok());
}

TEST(ExecutionModeTest, AtomicsRunOnOneDevice) {
  LaunchSharing sharing;
  sharing.uses_atomics = true;
  sharing.write_ranges = {{{0, 100}}, {{100, 200}}};
  EXPECT_EQ(ChooseExecutionMode(sharing), ExecutionMode::kSingleDevice);
}

TEST(ExecutionModeTest, DisjointWritesRunOnAllDevices) {
  LaunchSharing sharing;
  sharing.write_ranges = {{{0, 100}}, {{100, 200}}, {{200, 300}}};
  EXPECT_EQ(WriteOverlapRatio(sharing.write_ranges), 0.0);
  EXPECT_EQ(ChooseExecutionMode(sharing), ExecutionMode::kAllDevices);
}

TEST(ExecutionModeTest, EveryDeviceWritingTheSameRangeIsFullOverlap) {
  const std::vector<std::vector<ByteRange>> writes = {{{0, 4096}}, {{0, 4096}}, {{0, 4096}},
                                                      {{0, 4096}}};
  EXPECT_EQ(WriteOverlapRatio(writes), 1.0);
  EXPECT_EQ(ChooseExecutionMode(LaunchSharing{false, writes}), ExecutionMode::kSingleDevice);
}

TEST(ExecutionModeTest, OverlapIsSharedBytesOverWrittenBytes) {
  // Written: [0, 400); by two or more devices: [100, 200) and [250, 300).
  const std::vector<std::vector<ByteRange>> writes = {
      {{0, 200}}, {{100, 300}}, {{250, 400}}};
  EXPECT_DOUBLE_EQ(WriteOverlapRatio(writes), 150.0 / 400.0);
  EXPECT_EQ(ChooseExecutionMode(LaunchSharing{false, writes}), ExecutionMode::kAllDevices);
}

TEST(ExecutionModeTest, ExactlyHalfDoesNotExceedTheThreshold) {
  const std::vector<std::vector<ByteRange>> writes = {{{0, 200}}, {{100, 200}}};
  EXPECT_DOUBLE_EQ(WriteOverlapRatio(writes), 0.5);
  EXPECT_EQ(ChooseExecutionMode(LaunchSharing{false, writes}), ExecutionMode::kAllDevices);
  const std::vector<std::vector<ByteRange>> more = {{{0, 200}}, {{99, 200}}};
  EXPECT_EQ(ChooseExecutionMode(LaunchSharing{false, more}), ExecutionMode::kSingleDevice);
}

TEST(ExecutionModeTest, ADevicesOwnOverlappingRangesAreNotSharing) {
  const std::vector<std::vector<ByteRange>> writes = {{{0, 100}, {50, 150}, {20, 30}},
                                                      {{150, 300}}};
  EXPECT_EQ(WriteOverlapRatio(writes), 0.0);
}

TEST(ExecutionModeTest, NothingWrittenIsNoOverlap) {
  EXPECT_EQ(WriteOverlapRatio({}), 0.0);
  EXPECT_EQ(WriteOverlapRatio({{}, {{10, 10}}}), 0.0);
  EXPECT_EQ(ChooseExecutionMode(LaunchSharing{}), ExecutionMode::kAllDevices);
}

}  // namespace
}  // namespace umlab::snurhac
