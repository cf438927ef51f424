// A program's copies on the uffd backend (docs/hum.md, "On the uffd
// backend"): DMA copies, host accesses and hidden copies move real bytes
// that --verify checks word by word; a hidden copy's source is
// write-protected for real until the copy lands; the verifier catches a
// kernel that reads a copy's destination before the copy's bytes are there;
// and random copy programs run clean under every way of copying.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "policies/demand/demand.h"
#include "policies/hum/hum.h"
#include "policies/memcpy/memcpy.h"
#include "tests/program_builder.h"
#include "tests/random_copy_program.h"
#include "tests/sanitized_build.h"
#include "tests/uffd_harness.h"

namespace umlab::testing {
namespace {

constexpr uint64_t kHost = kRandomCopyHost;
constexpr Nanos kUs = 1000;
uint64_t HostBuffer(int index) { return kHost + uint64_t(index) * 4 * kBlockSize; }
uint64_t DeviceBlock(int block) { return ProgramBuilder::BlockAddress(block); }

void HostWork(ProgramBuilder& p, uint32_t exec_id, uint64_t address, uint64_t size, bool write) {
  p.OnHost(exec_id).Begin(exec_id, 10 * kUs).Access(address, size, write);
  p.End(exec_id);
}

// Data the host wrote goes to the device and comes back: the host fills
// buffer 0 (2 blocks and a half page), copies it in, a kernel reads it and
// writes block 3, which is copied out (at an odd offset into the host
// buffer) and read by host code. Every read is checked against the content
// the copies carried, so a copy that moved nothing, or the wrong bytes,
// fails the run.
ProgramBuilder RoundTrip() {
  constexpr uint64_t kInBytes = 2 * kBlockSize + kPageSize / 2;
  ProgramBuilder p;
  p.Alloc(0, 4).Activate(DeviceBlock(0), 4 * kBlockSize);  // cudaMalloc's
  HostWork(p, 1, HostBuffer(0), 3 * kBlockSize, /*write=*/true);
  p.Copy(CopyDirection::kHostToDevice, DeviceBlock(0), HostBuffer(0), kInBytes);
  p.Begin(2, 50 * kUs).Access(DeviceBlock(0), kInBytes, false);
  p.Access(DeviceBlock(3), kBlockSize, true).End(2);
  p.Copy(CopyDirection::kDeviceToHost, DeviceBlock(3), HostBuffer(1) + 24, kBlockSize);
  HostWork(p, 3, HostBuffer(1), kBlockSize + kPageSize, /*write=*/false);
  return p;
}

DeviceConfig V100() { return *DevicePreset("v100-pcie3"); }

UffdRun RunProgram(const ProgramBuilder& program, uint64_t frames, Policy& policy,
                   const DeviceConfig& device, const UffdOptions& options) {
  VectorSource source = program.Source();
  return RunOnUffd(source, frames, policy, device, options);
}

TEST(UffdCopyTest, DmaCopiesMoveTheBytesBothWays) {
  ProgramBuilder p = RoundTrip();
  MemcpyPolicy memcpy;
  const UffdRun run = RunProgram(p, 8, memcpy, V100(), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.copies, 2u);
  EXPECT_EQ(run.stats.dma_h2d_bytes, 2 * kBlockSize + kPageSize / 2);
  EXPECT_EQ(run.stats.dma_d2h_bytes, kBlockSize);
  // Device memory, mapped at the cudaMalloc: nothing faults, and the DMA
  // writes and reads device memory itself.
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  // The kernel's 1025 pages and host code's 513.
  EXPECT_GE(run.counters.pages_checked, 1025u + 513u);
}

TEST(UffdCopyTest, UnifiedMemoryCopiesAreTheHostsOwnAccesses) {
  ProgramBuilder p = RoundTrip();
  DemandPolicy demand;
  const UffdRun run = RunProgram(p, 8, demand, V100(), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.dma_h2d_bytes + run.stats.dma_d2h_bytes, 0u);
  EXPECT_EQ(run.stats.hidden_copy_bytes, 0u);
  EXPECT_GT(run.stats.faults, 0u);  // the kernel faults the copied pages in
  // The copy out takes block 3 off the device, written back.
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

TEST(UffdCopyTest, HiddenCopiesLandThroughTheMigrationThread) {
  ProgramBuilder p = RoundTrip();
  HumPolicy hum(2, true);
  const UffdRun run = RunProgram(p, 8, hum, V100(), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.hidden_copy_bytes, 2 * kBlockSize + kPageSize);  // whole pages
  EXPECT_EQ(run.stats.dma_h2d_bytes, 0u);
  EXPECT_EQ(run.stats.dma_d2h_bytes, kBlockSize);  // HUM passes copies back to CUDA
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

// Staging is paced at its modelled rate, dilated: 4 MiB at v100-pcie3's
// 2.51 GB/s per thread take 1.7 ms of modelled time, 167 ms of wall time at
// dilation 100, while the host reaches its store in microseconds.
UffdOptions Slow() {
  UffdOptions options = VerifiedUffdOptions();
  options.throttle = true;
  options.dilation = 100;
  return options;
}

TEST(UffdCopyTest, AHostStoreToAHiddenCopysSourceSleepsUntilTheCopyLands) {
  // The program frees (writes) the source right after an async copy of it,
  // as lbm does. The store must sleep on the write protection: had it gone
  // through, the staging threads could copy the new words, and the
  // kernel's read of the destination would find them instead of the
  // source's content at the copy (a corrupted word).
  ProgramBuilder p;
  p.Alloc(0, 2);
  HostWork(p, 1, HostBuffer(0), 2 * kBlockSize, /*write=*/true);
  p.Copy(CopyDirection::kHostToDevice, DeviceBlock(0), HostBuffer(0), 2 * kBlockSize,
         /*async=*/true);
  HostWork(p, 2, HostBuffer(0), kPageSize, /*write=*/true);  // free()
  p.Kernel(3, 10 * kUs, {0, 1});
  HumPolicy hum(1, true);
  const UffdRun run = RunProgram(p, 4, hum, V100(), Slow());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.protected_source_writes, 1u);
  EXPECT_EQ(run.stats.hidden_copy_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_GE(run.counters.pages_checked, 1024u);

  // The same store to a buffer no copy reads never waits.
  ProgramBuilder q;
  q.Alloc(0, 2);
  HostWork(q, 1, HostBuffer(0), 2 * kBlockSize, /*write=*/true);
  q.Copy(CopyDirection::kHostToDevice, DeviceBlock(0), HostBuffer(0), 2 * kBlockSize, true);
  HostWork(q, 2, HostBuffer(1), kPageSize, /*write=*/true);
  q.Kernel(3, 10 * kUs, {0, 1});
  HumPolicy hum2(1, true);
  const UffdRun free_run = RunProgram(q, 4, hum2, V100(), Slow());
  ASSERT_TRUE(free_run.status.ok()) << free_run.status;
  EXPECT_EQ(free_run.counters.protected_source_writes, 0u);
}

// HUM-no-sched starts copy 2 only once copy 1 has landed; a kernel that
// reads copy 2's destination must wait for it to start (CopyStream's
// MayLaunch). Launched without waiting, it faults those pages in as blank
// pages (no copy awaits them yet): the "blank page" race.
ProgramBuilder TwoCopiesThenAKernelOnTheSecond() {
  ProgramBuilder p;
  p.Alloc(0, 3);
  HostWork(p, 1, HostBuffer(0), 2 * kBlockSize, /*write=*/true);
  HostWork(p, 2, HostBuffer(1), kBlockSize, /*write=*/true);
  p.Copy(CopyDirection::kHostToDevice, DeviceBlock(0), HostBuffer(0), 2 * kBlockSize, true);
  p.Copy(CopyDirection::kHostToDevice, DeviceBlock(2), HostBuffer(1), kBlockSize, true);
  p.Kernel(3, 10 * kUs, {2});
  return p;
}

TEST(UffdCopyTest, VerifyReportsAKernelThatReadsADestinationBeforeItsCopy) {
  ProgramBuilder p = TwoCopiesThenAKernelOnTheSecond();
  HumPolicy waits(1, /*sched=*/false);
  const UffdRun ordered = RunProgram(p, 4, waits, V100(), Slow());
  ASSERT_TRUE(ordered.status.ok()) << ordered.status;
  EXPECT_EQ(ordered.counters.corrupted_words, 0u);
  EXPECT_GE(ordered.counters.pages_checked, 512u);

  ProgramBuilder q = TwoCopiesThenAKernelOnTheSecond();
  UffdOptions broken = Slow();
  broken.launch_ignoring_copies_for_testing = true;
  HumPolicy hurried(1, /*sched=*/false);
  const UffdRun raced = RunProgram(q, 4, hurried, V100(), broken);
  EXPECT_EQ(raced.status.code(), absl::StatusCode::kDataLoss) << raced.status;
  EXPECT_THAT(raced.status.message(), ::testing::HasSubstr("corrupted words"));
  EXPECT_GT(raced.counters.corrupted_words, 0u);
  EXPECT_GT(raced.counters.zeroed_pages_read, 0u);  // blank pages
}

TEST(UffdCopyTest, RandomCopyProgramsRunCleanUnderEveryWayOfCopying) {
  std::mt19937_64 rng(20261126);
  const int rounds = kSanitized ? 1 : 4;
  uint64_t early_launches = 0, awaited_pages = 0;
  for (int round = 0; round < rounds; ++round) {
    RandomCopyProgram random = MakeRandomCopyProgram(rng, 30);
    const int threads = 1 + static_cast<int>(rng() % 8);
    const bool sched = rng() % 2 == 0;
    for (uint64_t frames : {uint64_t{kRandomCopyBlocks}, uint64_t{kRandomCopyBlocks / 2}}) {
      HumPolicy hum(threads, sched);
      const UffdRun run =
          RunProgram(random.program, frames, hum, V100(), VerifiedUffdOptions());
      ASSERT_TRUE(run.status.ok()) << "round " << round << ", " << frames << " frames, "
                                   << threads << " threads, sched " << sched << ": "
                                   << run.status;
      EXPECT_EQ(run.stats.hidden_copy_bytes, random.hidden_pages * kPageSize) << round;
      EXPECT_EQ(run.counters.corrupted_words, 0u) << round;
      early_launches += run.stats.early_launches;
      awaited_pages += run.stats.faulted_awaiting_copy_pages;
    }
    DemandPolicy demand;
    const UffdRun um = RunProgram(random.program, kRandomCopyBlocks / 2, demand, V100(),
                                 VerifiedUffdOptions());
    ASSERT_TRUE(um.status.ok()) << "round " << round << " under demand: " << um.status;
    MemcpyPolicy memcpy;
    const UffdRun plain =
        RunProgram(random.program, kRandomCopyBlocks, memcpy, V100(), VerifiedUffdOptions());
    ASSERT_TRUE(plain.status.ok()) << "round " << round << " under memcpy: " << plain.status;
  }
  // How often a kernel went early depends on the threads' timing here (no
  // modelled time): printed, not asserted. The race itself is forced above.
  std::printf("early launches %llu, faulted pages that waited for their copy %llu\n",
              static_cast<unsigned long long>(early_launches),
              static_cast<unsigned long long>(awaited_pages));
}

}  // namespace
}  // namespace umlab::testing
