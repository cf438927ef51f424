// DeepUM's execution ids: same kernel, configuration and arguments -> same
// id; any difference -> a new one, numbered in order of first appearance.
#include "core/execution_id.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace umlab {
namespace {

std::vector<uint8_t> Pointers(std::initializer_list<uint64_t> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(uint64_t));
  size_t offset = 0;
  for (uint64_t v : values) {
    std::memcpy(bytes.data() + offset, &v, sizeof(v));
    offset += sizeof(v);
  }
  return bytes;
}

KernelLaunch Launch(std::string_view name, const std::vector<uint8_t>& args) {
  KernelLaunch launch;
  launch.kernel_name = name;
  launch.grid = {128, 1, 1};
  launch.block = {256, 1, 1};
  launch.argument_bytes = args;
  return launch;
}

TEST(ExecutionIdTest, RepeatedLaunchesOfAnIterationGetTheSameIds) {
  const std::vector<uint8_t> a = Pointers({0x7f0000000000, 0x7f0000200000});
  const std::vector<uint8_t> b = Pointers({0x7f0000200000, 0x7f0000400000});
  ExecutionIdTable table;
  // Iteration 1: gemm(a), relu(b), gemm(b).
  EXPECT_EQ(table.IdOf(Launch("gemm", a)), 1u);
  EXPECT_EQ(table.IdOf(Launch("relu", b)), 2u);
  EXPECT_EQ(table.IdOf(Launch("gemm", b)), 3u);
  // Iteration 2 repeats it, tensors at the same addresses.
  EXPECT_EQ(table.IdOf(Launch("gemm", a)), 1u);
  EXPECT_EQ(table.IdOf(Launch("relu", b)), 2u);
  EXPECT_EQ(table.IdOf(Launch("gemm", b)), 3u);
  EXPECT_EQ(table.size(), 3u);
}

TEST(ExecutionIdTest, EveryPartOfTheLaunchCounts) {
  const std::vector<uint8_t> args = Pointers({0x1000, 0x2000});
  const KernelLaunch base = Launch("gemm", args);
  const uint64_t hash = HashKernelLaunch(base);

  KernelLaunch other = base;
  other.kernel_name = "gemv";
  EXPECT_NE(HashKernelLaunch(other), hash);
  other = base;
  other.grid[1] = 2;
  EXPECT_NE(HashKernelLaunch(other), hash);
  other = base;
  other.block[0] = 128;
  EXPECT_NE(HashKernelLaunch(other), hash);
  other = base;
  other.shared_bytes = 4096;
  EXPECT_NE(HashKernelLaunch(other), hash);
  const std::vector<uint8_t> moved = Pointers({0x1000, 0x3000});
  other = base;
  other.argument_bytes = moved;
  EXPECT_NE(HashKernelLaunch(other), hash);
  // A byte moved from the name into the arguments is another launch.
  const std::vector<uint8_t> prefixed = {'m', 0, 0, 0};
  const std::vector<uint8_t> shorter = {0, 0, 0};
  KernelLaunch x = Launch("gem", prefixed);
  KernelLaunch y = Launch("gemm", shorter);
  EXPECT_NE(HashKernelLaunch(x), HashKernelLaunch(y));
}

TEST(ExecutionIdTest, TheHashIsFixed) {
  // FNV-1a over the documented fields, pinned so that ids in recorded traces
  // stay comparable across versions of umlab.
  const std::vector<uint8_t> args = Pointers({0x7f0000000000});
  EXPECT_EQ(HashKernelLaunch(Launch("k", args)), 3654149175837345195ull);
  EXPECT_EQ(HashKernelLaunch(KernelLaunch{}), 13954662697361679461ull);
}

}  // namespace
}  // namespace umlab
