// The HPC and micro patterns: deterministic streams whose accesses stay in
// their arrays and have the shape each pattern promises.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/workload_events.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

using ::umlab::testing::Drain;

std::vector<Event> Accesses(const std::vector<Event>& events) {
  std::vector<Event> accesses;
  int iteration = -1;
  for (const Event& e : events) {
    if (e.kind == EventKind::kIterationBegin) iteration = static_cast<int>(e.iteration);
    if (e.kind == EventKind::kAccess && iteration == 0) accesses.push_back(e);
  }
  return accesses;
}

class PatternTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PatternTest, DeterministicAndInsideItsArrays) {
  const std::vector<Event> events = Drain(GetParam());
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events == Drain(GetParam()));
  std::map<uint64_t, uint64_t> active;
  int accesses = 0;
  for (const Event& e : events) {
    if (e.kind == EventKind::kActivate) active[e.address] = e.address + e.size;
    if (e.kind == EventKind::kAccess) {
      ++accesses;
      auto it = active.upper_bound(e.address);
      ASSERT_NE(it, active.begin());
      --it;
      EXPECT_LE(e.address + e.size, it->second);
    }
  }
  EXPECT_GT(accesses, 0);
}

INSTANTIATE_TEST_SUITE_P(Patterns, PatternTest,
                         ::testing::Values("stream:elements=100000,iterations=2",
                                           "stencil2d:n=256,band=16,iterations=2",
                                           "gemm:n=512,tile=128,iterations=2",
                                           "gather:rows=100000,lookups=5000,iterations=2",
                                           "graph:nodes=100000,steps=5000,iterations=2"));

TEST(PatternShapeTest, StencilBandsReadOneHaloRowEachSide) {
  // 256 rows of 2 KiB in bands of 16: interior bands read 18 rows.
  int full = 0;
  for (const Event& e : Accesses(Drain("stencil2d:n=256,band=16,iterations=1"))) {
    if (e.access == AccessType::kRead && e.size == 18 * 2048) ++full;
  }
  EXPECT_EQ(full, 2 * 14);  // two sweeps, bands 1..14
}

TEST(PatternShapeTest, GemmReadsEveryTilePairOnce) {
  // 4x4 tiles: 16 output tiles x 4 k-steps x 2 reads, plus 16 writes.
  EXPECT_EQ(Accesses(Drain("gemm:n=512,tile=128,iterations=1")).size(), 16u * 9u);
}

TEST(PatternShapeTest, PointerChaseVisitsDistinctNodesInADependentOrder) {
  const std::vector<Event> accesses = Accesses(Drain("graph:nodes=100000,steps=5000,iterations=1"));
  std::set<uint64_t> nodes;
  bool sequential = true;
  for (size_t i = 0; i < accesses.size(); ++i) {
    nodes.insert(accesses[i].address);
    if (i > 0 && accesses[i].address != accesses[i - 1].address + accesses[i - 1].size) {
      sequential = false;
    }
  }
  EXPECT_EQ(nodes.size(), accesses.size());  // a cycle over all nodes: no repeats
  EXPECT_GT(accesses.size(), 4000u);
  EXPECT_FALSE(sequential);
}

}  // namespace
}  // namespace umlab
