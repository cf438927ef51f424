// Random copy programs (a fixed seed) on the sim under every way of
// copying: buffers that share pages, sync and async copies both ways,
// kernels and host code on random buffers, syncs, and a policy that keeps
// aiming prefetches, populates and remote mappings at the pages copies are
// bringing. Every run must pass the engine's invariants after every step
// and the sim's blank-page referee at every kernel begin and every landing
// while a kernel runs, and hidden copies must land exactly the pages they
// name.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>

#include "policies/demand/demand.h"
#include "policies/hum/hum.h"
#include "policies/memcpy/memcpy.h"
#include "tests/random_copy_program.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr int kBlocks = kRandomCopyBlocks;

// HUM's decisions, plus random prefetches, populates and remote mappings
// at every kernel begin, many of them at pages a copy has yet to land.
class MeddlingHum final : public Policy {
 public:
  MeddlingHum(int threads, bool sched, uint64_t seed) : hum_(threads, sched), rng_(seed) {}
  CopyMode HowToCopy(const CopyCommand& copy) override { return hum_.HowToCopy(copy); }
  int CopyThreads() const override { return hum_.CopyThreads(); }
  bool StartsCopy(CopyId copy, absl::Span<const CopyId> earlier) override {
    return hum_.StartsCopy(copy, earlier);
  }
  CopyId NextCopyToMigrate(absl::Span<const CopyId> waiting) override {
    return hum_.NextCopyToMigrate(waiting);
  }
  bool LaunchesEarly(const EarlyLaunchQuery& query) override { return hum_.LaunchesEarly(query); }
  bool MapsRemotely() const override { return true; }
  void OnKernelBegin(uint32_t exec_id) override {
    for (int i = 0; i < 3; ++i) {
      const BlockNumber block = BlockOfAddress(ProgramBuilder::BlockAddress(
          static_cast<int>(rng_() % kBlocks)));
      const PageMask pages = PageRangeMask(static_cast<int>(rng_() % 256), 256);
      switch (rng_() % 3) {
        case 0: context().Prefetch(block, pages, exec_id); break;
        case 1: context().Populate(block, pages); break;
        case 2: context().MapRemote(block, pages); break;
      }
    }
  }

 private:
  HumPolicy hum_;
  std::mt19937_64 rng_;
};

DeviceConfig StressDevice() {
  DeviceConfig device = TestDevice();
  device.host_stage_bytes_per_second = 1e9;
  device.host_stage_contention = 0.117;
  return device;
}

TEST(HumStressTest, RandomCopyProgramsNeverShowAKernelABlankPage) {
  std::mt19937_64 rng(20261126);
  // What the rounds went through, to show they reach the race: kernels
  // launched before their copies landed, and faults that waited for one.
  uint64_t early_launches = 0, awaited_pages = 0;
  for (int round = 0; round < 24; ++round) {
    const RandomCopyProgram random = MakeRandomCopyProgram(rng, 40);
    const int threads = 1 + static_cast<int>(rng() % 8);
    const bool sched = rng() % 2 == 0;
    // Room for every block, and (for the policies that page) less.
    for (uint64_t frames : {uint64_t{kBlocks}, uint64_t{kBlocks / 2}}) {
      MeddlingHum hum(threads, sched, rng());
      const SimRun run = RunOnSim(random.program, frames, hum, StressDevice());
      ASSERT_TRUE(run.status.ok()) << "round " << round << ", " << frames << " frames, "
                                   << threads << " threads, sched " << sched << ": "
                                   << run.status;
      EXPECT_EQ(run.stats.hidden_copy_bytes, random.hidden_pages * kPageSize) << round;
      early_launches += run.stats.early_launches;
      awaited_pages += run.stats.faulted_awaiting_copy_pages;

      DemandPolicy demand;
      const SimRun um = RunOnSim(random.program, frames, demand, StressDevice());
      ASSERT_TRUE(um.status.ok()) << "round " << round << " under demand: " << um.status;
    }
    MemcpyPolicy memcpy;
    const SimRun plain = RunOnSim(random.program, kBlocks, memcpy, StressDevice());
    ASSERT_TRUE(plain.status.ok()) << "round " << round << " under memcpy: " << plain.status;
  }
  EXPECT_GT(early_launches, 0u);
  EXPECT_GT(awaited_pages, 0u);
  std::printf("early launches %llu, faulted pages that waited for their copy %llu\n",
              static_cast<unsigned long long>(early_launches),
              static_cast<unsigned long long>(awaited_pages));
}

}  // namespace
}  // namespace umlab::testing
