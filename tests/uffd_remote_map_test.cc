// Remote mapping on the uffd backend (PolicyContext::MapRemote): the host
// copy itself is mapped into the device range, so SMs read and write it with
// no fault and no frame, charge the bytes their accesses touch to the
// throttle at the remote rates, and every word they read is checked
// (--verify), also after the data moves on and off the device. The counts
// are compared with the sim's for the same program: remote bytes, faults,
// traffic.
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/emu/uffd_device.h"
#include "gtest/gtest.h"
#include "tests/program_builder.h"
#include "tests/scripted_moves.h"
#include "tests/sim_harness.h"
#include "tests/uffd_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;

BlockNumber Block(int block) { return BlockOfAddress(ProgramBuilder::BlockAddress(block)); }

// The same program and script on both backends. A policy holds per-run
// state (which faults to answer with mappings), so each run gets its own.
struct BothRuns {
  UffdRun uffd;
  SimRun sim;
};
template <typename Script>
BothRuns RunOnBoth(const ProgramBuilder& program, uint64_t capacity_frames, Script script,
                   const UffdOptions& options = VerifiedUffdOptions(),
                   const DeviceConfig& device = TestDevice(4)) {
  BothRuns runs;
  ScriptedMoves uffd_policy;
  script(uffd_policy);
  VectorSource source = program.Source();
  runs.uffd = RunOnUffd(source, capacity_frames, uffd_policy, device, options);
  ScriptedMoves sim_policy;
  script(sim_policy);
  runs.sim = RunOnSim(program, capacity_frames, sim_policy, device);
  return runs;
}

void ExpectSameRemoteTraffic(const BothRuns& runs) {
  EXPECT_EQ(runs.uffd.stats.remote_mapped_bytes, runs.sim.stats.remote_mapped_bytes);
  EXPECT_EQ(runs.uffd.stats.remote_read_bytes, runs.sim.stats.remote_read_bytes);
  EXPECT_EQ(runs.uffd.stats.remote_write_bytes, runs.sim.stats.remote_write_bytes);
  EXPECT_EQ(runs.uffd.stats.faults, runs.sim.stats.faults);
  EXPECT_EQ(runs.uffd.stats.h2d_bytes, runs.sim.stats.h2d_bytes);
  EXPECT_EQ(runs.uffd.stats.d2h_bytes, runs.sim.stats.d2h_bytes);
  EXPECT_EQ(runs.uffd.stats.zero_filled_bytes, runs.sim.stats.zero_filled_bytes);
  EXPECT_EQ(runs.uffd.stats.page_accesses, runs.sim.stats.page_accesses);
}

TEST(UffdRemoteMap, ARemoteBlockIsWrittenAndReadWithoutFaultsOrFrames) {
  // Kernel 1 writes block 0 through a mapping made at its start, kernel 2
  // reads it back through the same mapping: every word it reads is kernel
  // 1's, from the host copy, with no fault, no copy and no device memory.
  ProgramBuilder program;
  program.Alloc(0, 1)
      .Kernel(1, 10 * kUs, {0}, /*write=*/true)
      .Kernel(2, 10 * kUs, {0});
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.counters.received_faults, 0u);
  EXPECT_EQ(run.stats.peak_used_frames, 0u);
  EXPECT_EQ(run.counters.peak_frames_held, 0u);
  EXPECT_EQ(run.counters.device_bytes, 0u);
  EXPECT_EQ(run.stats.h2d_bytes + run.stats.d2h_bytes + run.stats.zero_filled_bytes, 0u);
  EXPECT_EQ(run.stats.remote_mapped_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

TEST(UffdRemoteMap, AnAccessIsChargedOnlyTheBytesItTouches) {
  // 100 bytes read at offset 10 of a remote page, 3 bytes written across a
  // page boundary: the SMs touch whole pages, but the link carries only the
  // program's bytes, as on the sim.
  ProgramBuilder program;
  program.Alloc(0, 1);
  const uint64_t base = ProgramBuilder::BlockAddress(0);
  program.Begin(1, 10 * kUs).Access(base + 10, 100, false).End(1);
  program.Begin(2, 10 * kUs).Access(base + 2 * kPageSize - 1, 3, true).End(2);
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  EXPECT_EQ(runs.uffd.stats.remote_read_bytes, 100u);
  EXPECT_EQ(runs.uffd.stats.remote_write_bytes, 3u);
  EXPECT_EQ(runs.uffd.stats.faults, 0u);
  ExpectSameRemoteTraffic(runs);
}

TEST(UffdRemoteMap, WritesThroughTheMappingSurviveAMigrationAndAnEviction) {
  // Kernel 1 writes block 0 through a mapping. Kernel 2 prefetches it: the
  // mapping comes down and the host copy, holding kernel 1's words, is
  // copied in (not zero-filled); kernel 3 reads them on the device. Kernel 4
  // writes block 1 into the one frame, evicting block 0 (clean: the host
  // copy is still the one kernel 1 wrote), and kernel 5 reads block 0 once
  // more after it faults back in. Every word read is checked.
  ProgramBuilder program;
  program.Alloc(0, 2)
      .Kernel(1, 10 * kUs, {0}, /*write=*/true)
      .Kernel(2, 3000 * kUs, {})
      .Kernel(3, 10 * kUs, {0})
      .Kernel(4, 10 * kUs, {1}, /*write=*/true)
      .Kernel(5, 10 * kUs, {0});
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
    policy.At(2, [](PolicyContext& c) { c.Prefetch(Block(0), FullPageMask(), 3); });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, 0u);
  EXPECT_EQ(run.stats.prefetch_bytes, kBlockSize);
  // Block 0 in twice (prefetch, fault), block 1 zero-filled, and block 1's
  // write-back when block 0 comes back.
  EXPECT_EQ(run.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.faults, 2u * kPagesPerBlock);  // kernels 4 and 5, page by page
  EXPECT_EQ(run.counters.pages_checked, 2u * kPagesPerBlock);
  EXPECT_EQ(run.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

TEST(UffdRemoteMap, AFaultIsAnsweredWithARemoteMapping) {
  // Block 0, written by kernel 1 and evicted by kernel 2's block 1 (one
  // frame), is read back by kernel 3 through mappings the engine makes at
  // its faults: each faulting SM wakes to the host copy, which holds what
  // the eviction wrote back.
  ProgramBuilder program;
  program.Alloc(0, 2)
      .Kernel(1, 10 * kUs, {0}, /*write=*/true)
      .Kernel(2, 10 * kUs, {1}, /*write=*/true)
      .Kernel(3, 10 * kUs, {0});
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(3, [&policy](PolicyContext&) { policy.map_faults_remotely = true; });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);  // block 0 written back once
  EXPECT_EQ(run.stats.h2d_bytes, 0u);          // and never copied in again
  EXPECT_EQ(run.stats.remote_mapped_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  // Kernels 1 and 2 fault on every page; kernel 3 once per page, answered.
  EXPECT_EQ(run.stats.faults, 3u * kPagesPerBlock);
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

// Kernel 1 writes block 0; the block is freed and allocated again; kernel 2
// reads it.
ProgramBuilder WrittenFreedAndReallocated() {
  ProgramBuilder program;
  program.Alloc(0, 1)
      .Kernel(1, 10 * kUs, {0}, /*write=*/true)
      .Free(0, 1)
      .Alloc(0, 1)
      .Kernel(2, 10 * kUs, {0});
  return program;
}

TEST(UffdRemoteMap, AFreeTakesTheMappingDown) {
  // Block 0 is written through a mapping, freed and allocated again: the
  // next kernel must find fresh pages on the device (a zero-fill fault each),
  // not the host copy's old words through a mapping left behind.
  const ProgramBuilder program = WrittenFreedAndReallocated();
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);
  EXPECT_EQ(run.stats.faults, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

TEST(UffdRemoteMap, PagesWithNoDataYetReadAsZeroesThroughAMapping) {
  // As above, but block 0 is mapped remotely again once reallocated: its
  // host copy still holds kernel 1's words, and the mapping must show
  // zeroes instead, as a migration would have zero-filled the pages.
  const ProgramBuilder program = WrittenFreedAndReallocated();
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    auto map = [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); };
    policy.At(1, map);
    policy.At(2, map);
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.remote_mapped_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

TEST(UffdRemoteMap, TheSimAndUffdAgreeOnAMixedProgram) {
  // Three blocks, one frame. Kernel 1 writes block 0 through a mapping and
  // block 1 on the device; kernel 2 reads block 0 remotely and block 2,
  // which evicts block 1; kernel 3 reads 100 bytes and writes 3 of block 0;
  // kernel 4 reads block 1 through mappings made at its faults; kernel 5
  // prefetches block 0 (evicting block 2, and taking block 0's mapping
  // down); kernel 6 reads block 0 on the device and block 1 still through
  // its mappings; kernel 7 faults block 2 back in.
  ProgramBuilder program;
  const uint64_t base = ProgramBuilder::BlockAddress(0);
  program.Alloc(0, 3)
      .Kernel(1, 10 * kUs, {0, 1}, /*write=*/true)
      .Kernel(2, 10 * kUs, {0, 2})
      .Begin(3, 10 * kUs)
      .Access(base + 10, 100, false)
      .Access(base + 2 * kPageSize - 1, 3, true)
      .End(3)
      .Kernel(4, 10 * kUs, {1})
      .Kernel(5, 10000 * kUs, {})
      .Kernel(6, 10 * kUs, {0, 1})
      .Kernel(7, 10 * kUs, {2});
  const BothRuns runs = RunOnBoth(program, 1, [](ScriptedMoves& policy) {
    policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
    policy.At(4, [&policy](PolicyContext&) { policy.map_faults_remotely = true; });
    policy.At(5, [&policy](PolicyContext& c) {
      policy.map_faults_remotely = false;
      c.Prefetch(Block(0), FullPageMask(), 6);
    });
  });
  ASSERT_TRUE(runs.uffd.status.ok()) << runs.uffd.status;
  ASSERT_TRUE(runs.sim.status.ok()) << runs.sim.status;
  const UffdRun& run = runs.uffd;
  EXPECT_EQ(run.stats.remote_mapped_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.remote_write_bytes, kBlockSize + 3);
  EXPECT_EQ(run.stats.remote_read_bytes, 3 * kBlockSize + 100);
  // Blocks 1 and 2 on first touch, block 1 answered, block 2 back.
  EXPECT_EQ(run.stats.faults, 4u * kPagesPerBlock);
  // Block 0's prefetch (what kernels 1 and 3 wrote) and block 2's return;
  // blocks 1 and 2 written back.
  EXPECT_EQ(run.stats.h2d_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.d2h_bytes, 2 * kBlockSize);
  EXPECT_EQ(run.stats.evictions, runs.sim.stats.evictions);
  EXPECT_EQ(run.counters.zeroed_pages_read, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  ExpectSameRemoteTraffic(runs);
}

// The pages random accesses go to: the first 32 of each block, so that SMs
// meet on the same pages often.
constexpr int kHotPages = 32;
PageMask HotPages() { return PageRangeMask(0, kHotPages); }

// Answers faults on even pages with remote mappings and migrates a block's
// hot pages for a fault on an odd one, so mappings come down (the migration
// takes them over) while other SMs may be reading and writing through them.
class MapEvenPagesMigrateOdd final : public Policy {
 public:
  bool MapsRemotely() const override { return true; }
  PageMask MapRemotelyOnFault(BlockNumber, const PageMask& faulted) override {
    PageMask even;
    for (int page = 0; page < kPagesPerBlock; page += 2) even.set(page);
    return faulted & even;
  }
  PageMask ExpandFault(BlockNumber, const PageMask& faulted) override {
    return faulted | HotPages();
  }
};

TEST(UffdRemoteMap, MappingsChangeUnderRunningSmsWithoutLosingAWord) {
  // 8 SMs, random single-page reads and writes over the hot pages of 4
  // blocks through 2 frames and a 4-entry fault buffer: mappings are made
  // at faults and taken down by migrations of their pages while SMs touch
  // them, and blocks are evicted (written-back pages included). How the
  // accesses split between remote and device pages depends on the threads'
  // timing; every word read must be right whatever it is.
  constexpr int kBlocks = 4;
  constexpr int kKernels = 16;
  constexpr int kAccessesPerKernel = 1024;
  ProgramBuilder program;
  program.Alloc(0, kBlocks);
  // The first access faults on an even page of a block that is nowhere:
  // a mapping answers it, whatever comes after.
  program.Begin(1, 0).Access(ProgramBuilder::BlockAddress(0), kPageSize, false).End(1);
  uint64_t reads = 1;
  std::mt19937_64 rng(20261126);
  for (int kernel = 0; kernel < kKernels; ++kernel) {
    program.Begin(2 + kernel, 0);
    for (int i = 0; i < kAccessesPerKernel; ++i) {
      const int block = static_cast<int>(rng() % kBlocks);
      const int page = static_cast<int>(rng() % kHotPages);
      const bool write = rng() % 2 == 0;
      if (!write) ++reads;
      program.Access(ProgramBuilder::BlockAddress(block) + page * kPageSize, kPageSize, write);
    }
    program.End(2 + kernel);
  }
  DeviceConfig device = TestDevice(8);
  device.fault_buffer_entries = 4;
  device.fault_batch_size = 4;
  UffdOptions options = VerifiedUffdOptions();
  options.sms = 8;
  MapEvenPagesMigrateOdd policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 2, policy, device, options);
  // Engine invariants after every step, and the device's page table and
  // remote mappings against the engine's at the end (the harness).
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.pages_checked, reads);
  EXPECT_GE(run.stats.remote_read_bytes, kPageSize);
  EXPECT_GT(run.stats.evictions, 0u);
  EXPECT_EQ(run.stats.page_accesses, uint64_t{kKernels} * kAccessesPerKernel + 1);
  std::printf("remote: %llu mapped, %llu read, %llu written; faults %llu, evictions %llu\n",
              static_cast<unsigned long long>(run.stats.remote_mapped_bytes),
              static_cast<unsigned long long>(run.stats.remote_read_bytes),
              static_cast<unsigned long long>(run.stats.remote_write_bytes),
              static_cast<unsigned long long>(run.stats.faults),
              static_cast<unsigned long long>(run.stats.evictions));
}

TEST(UffdRemoteMap, RemoteAccessesWaitForTheirBytesOnTheLink) {
  // With the throttle on, an SM waits for each remote access's bytes at
  // the remote read rate: a kernel that reads a whole remote block cannot
  // end before 2 MiB have crossed at 0.25 GB/s (8.4 ms modelled), whatever
  // its 10 us of compute. (A lower bound only: a loaded host can only make
  // the run longer, never shorter.)
  ProgramBuilder program;
  program.Alloc(0, 1).Kernel(1, 10 * kUs, {0});
  DeviceConfig device = TestDevice(4);
  device.link.remote_read_bytes_per_second = 0.25e9;
  device.link.remote_latency_ns = 0;
  UffdOptions options = VerifiedUffdOptions();
  options.throttle = true;
  options.dilation = 1;
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& c) { c.MapRemote(Block(0), FullPageMask()); });
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 1, policy, device, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.remote_read_bytes, kBlockSize);
  EXPECT_EQ(run.stats.faults, 0u);
  // The last booking ends at the block's time; its SM sleeps to within
  // 20 us of it (RunShare's pacing).
  EXPECT_GE(run.stats.time_ns, static_cast<Nanos>(kBlockSize * 4) - 20 * kUs);
}

TEST(UffdRemoteMap, HugeFramesDoNotMapRemotely) {
  UffdOptions options = VerifiedUffdOptions();
  options.max_blocks = 8;
  absl::StatusOr<std::unique_ptr<UffdBackend>> small =
      UffdBackend::Create(TestDevice(4), 1, options);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE((*small)->MapsRemotely());
  options.huge_pages = true;
  // An unlimited capacity takes no huge pages up front.
  absl::StatusOr<std::unique_ptr<UffdBackend>> huge =
      UffdBackend::Create(TestDevice(4), kUnlimitedFrames, options);
  if (!huge.ok()) GTEST_SKIP() << "no hugetlb memfd here: " << huge.status();
  EXPECT_FALSE((*huge)->MapsRemotely());
}

// The device range's mappings, as /proc/self/maps lists them: how many lie
// in [start, end), and how many of those map the host memfd.
struct RangeMappings {
  int total = 0;
  int host = 0;
};
RangeMappings MappingsIn(const char* start, uint64_t length) {
  RangeMappings found;
  const auto begin = reinterpret_cast<uintptr_t>(start);
  if (FILE* f = std::fopen("/proc/self/maps", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      uintptr_t from = 0;
      if (std::sscanf(line, "%lx-", &from) != 1) continue;
      if (from < begin || from >= begin + length) continue;
      ++found.total;
      if (std::strstr(line, "umlab-uffd-host") != nullptr) ++found.host;
    }
    std::fclose(f);
  }
  return found;
}

TEST(UffdRemoteMapDevice, TheHostCopyIsMappedInPlaceAndDeviceMemoryComesBackRegistered) {
  UffdDevice::Options options;
  options.max_blocks = 4;
  absl::StatusOr<std::unique_ptr<UffdDevice>> created = UffdDevice::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  UffdDevice& device = **created;
  ASSERT_TRUE(device.AddSlots(2).ok());
  const uint64_t range = device.range_bytes();
  char* const base = device.DevicePage(0, 0);
  ASSERT_EQ(MappingsIn(base, range).total, 1);
  char* const page3 = device.DevicePage(1, 3);
  char* const page4 = device.DevicePage(1, 4);

  // Pages 3 and 4 of slot 1 show its host copy: one mapping of the host
  // memfd, splitting the device range in three. No fault handler runs yet,
  // so a touch that faulted would hang here.
  const PageMask pages = PageRangeMask(3, 2);
  ASSERT_TRUE(device.MapHostCopy(1, pages, PageMask()).ok());
  EXPECT_EQ(MappingsIn(base, range).total, 3);
  EXPECT_EQ(MappingsIn(base, range).host, 1);
  std::memset(page3, 0xab, kPageSize);
  std::memset(page4, 0x77, kPageSize);
  ASSERT_TRUE(device.UnmapHostCopy(1, pages).ok());
  // Mapped again with page 4 zeroed: it held data, now it reads zeroes.
  ASSERT_TRUE(device.MapHostCopy(1, pages, PageRangeMask(4, 1)).ok());
  EXPECT_EQ(static_cast<unsigned char>(page3[9]), 0xab);
  EXPECT_EQ(page4[100], 0);
  page4[kPageSize - 1] = 0x5a;

  std::atomic<int> faults{0};
  ASSERT_TRUE(device
                  .StartReader([&](const UffdFault& fault) {
                    ++faults;
                    // Serve the fault from the host copy, as a migration would.
                    const uint64_t slot = fault.offset / kBlockSize;
                    const int page = static_cast<int>(fault.offset % kBlockSize / kPageSize);
                    const PageMask one = PageRangeMask(page, 1);
                    EXPECT_TRUE(device.CopyIn(slot, one, PageMask()).ok());
                    EXPECT_TRUE(device.Map(slot, one, /*write_protect=*/false).ok());
                    EXPECT_TRUE(device.Wake(fault.offset & ~(kPageSize - 1), kPageSize).ok());
                  })
                  .ok());
  ASSERT_TRUE(device.UnmapHostCopy(1, pages).ok());
  // Merged back into one registered mapping of device memory...
  EXPECT_EQ(MappingsIn(base, range).total, 1);
  // ...in which the pages are unmapped: touching them faults, and the bytes
  // the fault brings in from the host copy are the ones written through it.
  EXPECT_EQ(static_cast<unsigned char>(page3[7]), 0xab);
  EXPECT_EQ(page4[kPageSize - 1], 0x5a);
  EXPECT_EQ(page4[0], 0);
  EXPECT_EQ(faults.load(), 2);
  device.StopReader();
}

}  // namespace
}  // namespace umlab::testing
