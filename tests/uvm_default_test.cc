// The UVM driver's default behaviour: the tree prefetcher's rule on
// hand-made page masks, and thrashing detection on the sim.
#include "policies/uvm_default/uvm_default.h"

#include <gtest/gtest.h>

#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr int kThreshold = 51;
constexpr int kBigPage = 16;  // 64 KB

PageMask Prefetch(const PageMask& faulted, const PageMask& present,
                  const PageMask& thrashing = PageMask()) {
  return TreePrefetch(faulted, present, thrashing, kThreshold, kBigPage);
}

TEST(TreePrefetchTest, AFaultGrowsToItsBigPage) {
  // Nothing resident: page 5 brings pages 0..15. The 32-page subtree is then
  // exactly half full, not more than 51%.
  EXPECT_EQ(Prefetch(PageMask().set(5), PageMask()), PageRangeMask(0, 16));
  // Faults in two big pages grow both.
  EXPECT_EQ(Prefetch(PageMask().set(5).set(300), PageMask()),
            PageRangeMask(0, 16) | PageRangeMask(288, 16));
}

TEST(TreePrefetchTest, FillsTheLargestSubtreeMoreThanHalfFull) {
  // Pages 16..47 resident, fault on 0: subtree 0..31 is full, 0..63 holds
  // 48 of 64 (75%), 0..127 holds 48 of 128 (37.5%): pages 0..63.
  EXPECT_EQ(Prefetch(PageMask().set(0), PageRangeMask(16, 32)), PageRangeMask(0, 64));
  // Pages 16..31 resident: 0..31 full, 0..63 at 50%: pages 0..31.
  EXPECT_EQ(Prefetch(PageMask().set(0), PageRangeMask(16, 16)), PageRangeMask(0, 32));
}

TEST(TreePrefetchTest, FiftyOnePercentIsTheBoundary) {
  // The lower half (256 pages) full after the fault grows; the whole block
  // needs more than 51% of 512 = 261.12 pages, so 262.
  const PageMask lower = PageRangeMask(16, 240);
  EXPECT_EQ(Prefetch(PageMask().set(0), lower | PageRangeMask(256, 5)),
            PageRangeMask(0, 256));  // 261 pages: not enough
  EXPECT_EQ(Prefetch(PageMask().set(0), lower | PageRangeMask(256, 6)),
            FullPageMask());  // 262 pages: the whole block
  // The threshold is a parameter: at 50% the 32-page subtree of the first
  // test is still exactly half, and half is not more than half.
  EXPECT_EQ(TreePrefetch(PageMask().set(5), PageMask(), PageMask(), 50, kBigPage),
            PageRangeMask(0, 16));
  EXPECT_EQ(TreePrefetch(PageMask().set(5), PageMask(), PageMask(), 49, kBigPage),
            PageRangeMask(0, 32));
}

TEST(TreePrefetchTest, ThrashingPagesNeitherGrowNorArePrefetched) {
  // Page 1 thrashes: the big page of a fault on 0 does not grow, and page 1
  // is never prefetched even when its subtree qualifies.
  EXPECT_EQ(Prefetch(PageMask().set(0), PageMask(), PageMask().set(1)), PageMask().set(0));
  // Fault on 16 with 0..15 resident and 17 thrashing: 16's big page does not
  // grow, yet 0..31 holds 17 of 32 pages (53%) and is prefetched, all but 17.
  EXPECT_EQ(Prefetch(PageMask().set(16), PageRangeMask(0, 16), PageMask().set(17)),
            PageRangeMask(0, 32) & ~PageMask().set(17));
}

// One SM walks pages 0 of five blocks round and round with four frames: the
// least recently migrated block is always the next one needed, so every
// access faults, and each page comes back within tens of microseconds.
ProgramBuilder RoundRobin(int rounds) {
  ProgramBuilder p;
  p.Alloc(0, 5);
  p.Iteration(0).Begin(1, 1000);
  for (int round = 0; round < rounds; ++round) {
    for (int block = 0; block < 5; ++block) {
      p.Access(ProgramBuilder::BlockAddress(block), kPageSize, /*write=*/false);
    }
  }
  p.End(1);
  return p;
}

DeviceConfig FastLink() {
  DeviceConfig device = TestDevice(/*sms=*/1);
  device.link = LinkConfig{16e9, 16e9, 0};  // 64 KB in 4 us
  return device;
}

struct ThrashRun {
  SimRun run;
  uint64_t detections, pins;
};

ThrashRun RunThrashing(bool thrashing, Nanos lapse_ns) {
  UvmDefaultOptions options;
  options.thrashing = thrashing;
  options.lapse_ns = lapse_ns;
  UvmDefaultPolicy policy(options);
  ThrashRun result{RunOnSim(RoundRobin(20), 4, policy, FastLink()), 0, 0};
  result.detections = policy.thrashing_detections();
  result.pins = policy.pins();
  return result;
}

TEST(UvmDefaultThrashingTest, PinsABlockWhosePagesComeBackWithinTheLapse) {
  const ThrashRun off = RunThrashing(/*thrashing=*/false, 500000);
  ASSERT_TRUE(off.run.status.ok()) << off.run.status;
  // Without detection every one of the 100 accesses faults.
  EXPECT_EQ(off.run.stats.faults, 100u);
  EXPECT_EQ(off.detections, 0u);

  const ThrashRun on = RunThrashing(/*thrashing=*/true, 500000);
  ASSERT_TRUE(on.run.status.ok()) << on.run.status;
  // Block 0's page migrates in every round. As in the driver, round 0 only
  // stamps the block, round 1 (within a lapse of it) starts per-page
  // tracking and stamps the page, and rounds 2, 3 and 4 are three thrashing
  // events: the block is pinned (a quarter of four frames is one pin) and
  // stays for the remaining 15 rounds, while the other four blocks keep
  // cycling through three frames.
  EXPECT_GE(on.detections, 1u);
  EXPECT_EQ(on.pins, 1u);
  EXPECT_EQ(on.run.stats.faults, 100u - 15u);
}

TEST(UvmDefaultThrashingTest, MigrationsFartherApartThanTheLapseAreNotThrashing) {
  // A 1 us lapse: consecutive migrations of a page are 5 faults apart (tens
  // of microseconds), so no event counts.
  const ThrashRun run = RunThrashing(/*thrashing=*/true, 1000);
  ASSERT_TRUE(run.run.status.ok()) << run.run.status;
  EXPECT_EQ(run.detections, 0u);
  EXPECT_EQ(run.pins, 0u);
  EXPECT_EQ(run.run.stats.faults, 100u);
}

bool AnyThrashing(const UvmDefaultPolicy& policy) {
  for (int block = 0; block < 5; ++block) {
    if (policy.ThrashingPages(BlockOfAddress(ProgramBuilder::BlockAddress(block))).any()) {
      return true;
    }
  }
  return false;
}

TEST(UvmDefaultThrashingTest, AFreedBlockForgetsItsHistoryAndPin) {
  // The thrashing run above pins a block and marks pages thrashing; then
  // every block is freed. The driver drops a block's thrashing state with
  // the block, so afterwards nothing is pinned and no page is thrashing.
  UvmDefaultOptions options;
  options.lapse_ns = 500000;
  UvmDefaultPolicy policy(options);
  ProgramBuilder program = RoundRobin(20);
  const SimRun kept = RunOnSim(program, 4, policy, FastLink());
  ASSERT_TRUE(kept.status.ok()) << kept.status;
  ASSERT_EQ(policy.pinned_blocks(), 1u);
  ASSERT_TRUE(AnyThrashing(policy));

  UvmDefaultPolicy freed_policy(options);
  program.Free(0, 5);
  const SimRun freed = RunOnSim(program, 4, freed_policy, FastLink());
  ASSERT_TRUE(freed.status.ok()) << freed.status;
  EXPECT_EQ(freed_policy.pins(), 1u);
  EXPECT_EQ(freed_policy.pinned_blocks(), 0u);
  EXPECT_FALSE(AnyThrashing(freed_policy));
}

}  // namespace
}  // namespace umlab::testing
