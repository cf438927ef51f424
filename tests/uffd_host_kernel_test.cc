// Host kernels on the uffd backend (KernelPlace::kHost): the run thread
// reads and writes the host copies of the kernel's pages once the engine
// has taken them off the device, and every word is checked (--verify): a
// host read against what the device last wrote (so a missing write-back is
// caught), a device read after a host write against what the CPU wrote.
// Traffic is compared with the sim's for the same program.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policies/demand/demand.h"
#include "tests/program_builder.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"
#include "tests/uffd_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;

BlockNumber Block(int block) { return BlockOfAddress(ProgramBuilder::BlockAddress(block)); }

UffdRun RunChecked(const ProgramBuilder& program, uint64_t capacity_frames, Policy& policy,
                   const UffdOptions& options = VerifiedUffdOptions()) {
  VectorSource source = program.Source();
  return RunOnUffd(source, capacity_frames, policy, TestDevice(4), options);
}

TEST(UffdHostKernel, AHostReadFindsTheDevicesWordsWrittenBack) {
  // Kernel 1 writes block 0 on the device; host kernel 2 reads it: the
  // block is written back first, and the CPU reads every word kernel 1
  // wrote from the host copy.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(2).Kernel(2, 10 * kUs, {0});
  DemandPolicy policy;
  const UffdRun run = RunChecked(program, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_kernels, 1u);
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  // The host's accesses are not the device's.
  EXPECT_EQ(run.stats.page_accesses, uint64_t{kPagesPerBlock});
}

// Demand, except that an evicted block's pages are dropped, not written
// back: the device's words never reach the host copy.
class DropsWhatItEvicts final : public Policy {
 public:
  PageMask PagesToDrop(const BlockState& victim) override { return victim.resident; }
};

TEST(UffdHostKernel, AHostReadCatchesAWriteBackThatNeverHappened) {
  // As above, but the device's words are dropped instead of written back:
  // the CPU finds zeroes where kernel 1's words should be, and the run
  // fails on the first of them.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(2).Kernel(2, 10 * kUs, {0});
  DropsWhatItEvicts policy;
  const UffdRun run = RunChecked(program, 2, policy);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kDataLoss) << run.status;
  EXPECT_THAT(run.status.message(), ::testing::HasSubstr("written by kernel 1"));
  EXPECT_EQ(run.stats.host_writeback_bytes, 0u);
  EXPECT_EQ(run.counters.zeroed_pages_read, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.corrupted_words, uint64_t{kPagesPerBlock} * kPageSize / 8);
}

TEST(UffdHostKernel, TheDeviceReadsWhatTheHostWrote) {
  // Host kernel 1 writes block 0, which held no data: kernel 2's faults
  // copy the CPU's words in (not zeroes), and it checks every one. Kernel
  // 3 writes the block on the device, host kernel 4 writes it again in
  // place after its write-back, and kernel 5 reads the CPU's words.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.OnHost(1).Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.Kernel(2, 10 * kUs, {0});
  program.Kernel(3, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(4).Kernel(4, 10 * kUs, {0}, /*write=*/true);
  program.Kernel(5, 10 * kUs, {0});
  DemandPolicy policy;
  const UffdRun run = RunChecked(program, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.host_kernels, 2u);
  EXPECT_EQ(run.stats.zero_filled_bytes, 0u);
  // In for kernel 2, out for host kernel 4 (kernel 3 dirtied it), in for 5.
  EXPECT_EQ(run.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.counters.pages_checked, 2u * kPagesPerBlock);
  EXPECT_EQ(run.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

TEST(UffdHostKernel, AFreshPageReadsAsZeroesOnTheHost) {
  // Block 0 is written, freed and allocated again; host kernel 3 reads it.
  // Its host copy still holds kernel 1's words, but the pages hold no data
  // now, and the CPU must find zeroes, as a device's first touch does.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(2).Kernel(2, 10 * kUs, {0});  // kernel 1's words go to the host copy
  program.Free(0, 1).Alloc(0, 1);
  program.OnHost(3).Kernel(3, 10 * kUs, {0});
  DemandPolicy policy;
  const UffdRun run = RunChecked(program, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.pages_checked, 2u * kPagesPerBlock);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

// Demand, except that it asks for every evicted page back at once.
class PrefetchesWhatLeaves final : public Policy {
 public:
  void OnEvicted(BlockNumber block, const PageMask& pages) override {
    context().Prefetch(block, pages, 0);
  }
};

TEST(UffdHostKernel, APrefetchOfPagesTheHostHoldsIsNotIssued) {
  // Host kernel 2's claim evicts block 0, which kernel 1 wrote, and the
  // policy asks for it back at once, while the CPU holds it: nothing is
  // prefetched (the CPU reads the written-back words undisturbed), and
  // kernel 3 faults the block in.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(2).Kernel(2, 10 * kUs, {0});
  program.Kernel(3, 10 * kUs, {0});
  PrefetchesWhatLeaves policy;
  const UffdRun run = RunChecked(program, 2, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.prefetch_requests, 1u);
  EXPECT_EQ(run.stats.prefetch_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);  // kernel 1's first touch only
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.faulted_blocks, 2u);
  EXPECT_EQ(run.stats.fault_migrated_bytes, kBlockSize);  // kernel 3's copy back
  EXPECT_EQ(run.counters.pages_checked, 2u * kPagesPerBlock);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

TEST(UffdHostKernel, RemotelyMappedPagesAreTheHostCopyTheCpuTouches) {
  // Block 0 is mapped for the device in host memory. Kernel 1 writes it
  // through the mapping, host kernel 2 reads and rewrites it in host
  // memory (nothing to take off the device), and kernel 3 reads the CPU's
  // words through the same mapping: no fault, no copy either way.
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.Kernel(1, 10 * kUs, {0}, /*write=*/true);
  program.OnHost(2).Begin(2, 10 * kUs);
  program.Access(ProgramBuilder::BlockAddress(0), kBlockSize, /*write=*/false);
  program.Access(ProgramBuilder::BlockAddress(0), kBlockSize, /*write=*/true);
  program.End(2);
  program.Kernel(3, 10 * kUs, {0});
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  const UffdRun run = RunChecked(program, 1, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.stats.h2d_bytes + run.stats.d2h_bytes, 0u);
  EXPECT_EQ(run.stats.host_writeback_bytes, 0u);
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.counters.pages_checked, 2u * kPagesPerBlock);  // the host's and kernel 3's
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

TEST(UffdHostKernel, TheSimAndUffdAgreeOnTraffic) {
  // Three blocks through two frames. Kernel 1 writes blocks 0 and 1; host
  // kernel 2 reads block 0 (written back); kernel 3 reads block 0 (back
  // in) and writes block 2 (block 1 evicted); host kernel 4 writes block 1
  // and reads block 2 (written back); kernel 5 reads block 1, the CPU's
  // words copied in.
  ProgramBuilder program;
  program.Alloc(0, 3);
  program.Kernel(1, 10 * kUs, {0, 1}, /*write=*/true);
  program.OnHost(2).Kernel(2, 100 * kUs, {0});
  program.Begin(3, 10 * kUs)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, /*write=*/false)
      .Access(ProgramBuilder::BlockAddress(2), kBlockSize, /*write=*/true)
      .End(3);
  program.OnHost(4).Begin(4, 100 * kUs);
  program.Access(ProgramBuilder::BlockAddress(1), kBlockSize, /*write=*/true);
  program.Access(ProgramBuilder::BlockAddress(2), kBlockSize, /*write=*/false);
  program.End(4);
  program.Kernel(5, 10 * kUs, {1});
  DemandPolicy uffd_policy;
  const UffdRun uffd = RunChecked(program, 2, uffd_policy);
  ASSERT_TRUE(uffd.status.ok()) << uffd.status;
  DemandPolicy sim_policy;
  const SimRun sim = RunOnSim(program, 2, sim_policy, TestDevice(4));
  ASSERT_TRUE(sim.status.ok()) << sim.status;
  EXPECT_EQ(uffd.stats.host_kernels, 2u);
  EXPECT_EQ(uffd.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(uffd.stats.d2h_bytes, 3 * kBlockSize);
  EXPECT_EQ(uffd.stats.host_writeback_bytes, 2 * kBlockSize);
  EXPECT_EQ(uffd.counters.corrupted_words, 0u);
  EXPECT_EQ(uffd.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(uffd.stats.host_kernels, sim.stats.host_kernels);
  EXPECT_EQ(uffd.stats.h2d_bytes, sim.stats.h2d_bytes);
  EXPECT_EQ(uffd.stats.d2h_bytes, sim.stats.d2h_bytes);
  EXPECT_EQ(uffd.stats.host_writeback_bytes, sim.stats.host_writeback_bytes);
  EXPECT_EQ(uffd.stats.zero_filled_bytes, sim.stats.zero_filled_bytes);
  EXPECT_EQ(uffd.stats.faults, sim.stats.faults);
  EXPECT_EQ(uffd.stats.evictions, sim.stats.evictions);
  EXPECT_EQ(uffd.stats.page_accesses, sim.stats.page_accesses);
}

TEST(UffdHostKernel, AHostKernelLastsItsCpuTimeAtLeast) {
  // With the throttle on, the host kernel's 20 ms of CPU time pass in
  // modelled time (a lower bound: a loaded host only makes it longer).
  ProgramBuilder program;
  program.Alloc(0, 1);
  program.OnHost(1).Kernel(1, 20000 * kUs, {0}, /*write=*/true);
  UffdOptions options = VerifiedUffdOptions();
  options.throttle = true;
  options.dilation = 2;
  DemandPolicy policy;
  const UffdRun run = RunChecked(program, 1, policy, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_GE(run.stats.time_ns, 20000 * kUs);
  EXPECT_EQ(run.stats.host_wait_ns, 0);  // nothing of it was on the device
}

}  // namespace
}  // namespace umlab::testing
