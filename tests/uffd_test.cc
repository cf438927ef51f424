// The uffd backend: invalidation, teardown on SIGINT, the error when
// userfaultfd is unavailable, and the CLI's --verify / --dilation.
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "backends/emu/storage_file.h"
#include "backends/emu/uffd_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "policies/demand/demand.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"
#include "tests/uffd_harness.h"
#include "tests/temp_path.h"

namespace umlab::testing {
namespace {

// Demand paging that drops a victim's inactive pages instead of writing
// them back, as DeepUM's invalidation does.
class DropInactivePolicy final : public Policy {
 public:
  PageMask PagesToDrop(const BlockState& victim) override { return victim.inactive; }
};

TEST(UffdInvalidation, InactiveBytesComeBackZeroActiveBytesKeepTheirValues) {
  constexpr int kHalf = kPagesPerBlock / 2;
  ProgramBuilder program;
  program.Alloc(0, 2)
      .Kernel(1, 0, {0}, /*write=*/true)  // block 0 holds data on every page
      .Deactivate(ProgramBuilder::BlockAddress(0) + kHalf * kPageSize, kHalf * kPageSize)
      .Kernel(2, 0, {1}, /*write=*/true)  // one frame: evicts block 0
      .Kernel(3, 0, {0}, /*write=*/false);  // reads all of block 0 back
  DropInactivePolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 1, policy, TestDevice(4), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.invalidated_bytes, kHalf * kPageSize);
  // The active half was written back and read back word for word...
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  // (kernel 3 evicts block 1 in turn, all of it dirty)
  EXPECT_EQ(run.stats.d2h_bytes, kHalf * kPageSize + kBlockSize);
  // ...and every page of the inactive half came back as zeroes.
  EXPECT_EQ(run.counters.zeroed_pages_read, static_cast<uint64_t>(kHalf));
  EXPECT_EQ(run.counters.pages_checked, static_cast<uint64_t>(kPagesPerBlock));
}

TEST(UffdInvalidation, FreedMemoryIsZeroWhenReallocated) {
  ProgramBuilder program;
  program.Alloc(0, 1)
      .Kernel(1, 0, {0}, /*write=*/true)
      .Free(0, 1)
      .Alloc(0, 1)
      .Kernel(2, 0, {0}, /*write=*/false);
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 2, policy, TestDevice(4), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.stats.invalidated_bytes, kBlockSize);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);  // all zero-filled, nothing copied
}

TEST(UffdInvalidation, DataSurvivesEvictionRoundTrips) {
  // Three blocks through one frame, written then read in turn, twice.
  ProgramBuilder program;
  program.Alloc(0, 3);
  for (int round = 0; round < 2; ++round) {
    for (int block = 0; block < 3; ++block) {
      program.Kernel(10 + block, 0, {block}, /*write=*/true);
    }
    for (int block = 0; block < 3; ++block) program.Kernel(20 + block, 0, {block});
  }
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 1, policy, TestDevice(4), VerifiedUffdOptions());
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.pages_checked, 6u * kPagesPerBlock);
  // Same program on the sim: same traffic, page for page.
  DemandPolicy sim_policy;
  const SimRun sim = RunOnSim(program, 1, sim_policy);
  ASSERT_TRUE(sim.status.ok()) << sim.status;
  EXPECT_EQ(run.stats.h2d_bytes, sim.stats.h2d_bytes);
  EXPECT_EQ(run.stats.d2h_bytes, sim.stats.d2h_bytes);
  EXPECT_EQ(run.stats.evictions, sim.stats.evictions);
}

// Every byte written to the storage file comes back: ranges of one page, of
// several requests in flight, and of a whole block, at scattered offsets.
TEST(UffdStorage, EveryByteComesBackFromTheStorageFile) {
  absl::StatusOr<std::unique_ptr<StorageFile>> file = StorageFile::Create("/var/tmp");
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {0, kPageSize}, {7 * kBlockSize + 3 * kPageSize, kBlockSize / 2 + kPageSize},
      {2 * kBlockSize, kBlockSize}};
  std::vector<std::string> written;
  uint64_t seed = 12345;
  for (const auto& [offset, length] : ranges) {
    std::string data(length, '\0');
    for (char& c : data) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      c = static_cast<char>(seed >> 56);
    }
    ASSERT_TRUE((*file)->Write(offset, data.data(), length).ok());
    written.push_back(std::move(data));
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    std::string back(ranges[i].second, '\0');
    ASSERT_TRUE((*file)->Read(ranges[i].first, back.data(), back.size()).ok());
    EXPECT_TRUE(back == written[i]) << "range " << i << " differs";
  }
  EXPECT_EQ((*file)->bytes_written(), (*file)->bytes_read());
  // Past what was ever written, a read comes back short: an error, not zeroes.
  std::string past(kPageSize, '\0');
  const absl::Status short_read = (*file)->Read(64 * kBlockSize, past.data(), past.size());
  EXPECT_EQ(short_read.code(), absl::StatusCode::kDataLoss) << short_read;
  const auto missing = StorageFile::Create("/nonexistent/umlab");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), ::testing::HasSubstr("storage_dir"));
}

// Six blocks through two frames, with one block of host memory and storage
// behind it: evictions go to both, and --verify checks every word that came
// back, from the host or from the file. Traffic and tiers match the sim's.
TEST(UffdStorage, DataSurvivesRoundTripsThroughStorage) {
  DeviceConfig device = TestDevice(4);
  device.link.storage = StorageConfig{true, 0.25e9, 0.125e9, 0, 0};
  device.host_memory_bytes = kBlockSize;
  ProgramBuilder program;
  program.Alloc(0, 6);
  for (int round = 0; round < 2; ++round) {
    for (int block = 0; block < 6; ++block) program.Kernel(10 + block, 0, {block}, true);
    for (int block = 0; block < 6; ++block) program.Kernel(30 + block, 0, {block});
  }
  UffdOptions options = VerifiedUffdOptions();
  options.storage_dir = "/var/tmp";
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 2, policy, device, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.pages_checked, 12u * kPagesPerBlock);
  EXPECT_GT(run.stats.storage_read_bytes, 0u);
  DemandPolicy sim_policy;
  const SimRun sim = RunOnSim(program, 2, sim_policy, device);
  ASSERT_TRUE(sim.status.ok()) << sim.status;
  EXPECT_EQ(run.stats.h2d_bytes, sim.stats.h2d_bytes);
  EXPECT_EQ(run.stats.d2h_bytes, sim.stats.d2h_bytes);
  EXPECT_EQ(run.stats.storage_read_bytes, sim.stats.storage_read_bytes);
  EXPECT_EQ(run.stats.storage_write_bytes, sim.stats.storage_write_bytes);
  EXPECT_EQ(run.stats.peak_host_bytes, sim.stats.peak_host_bytes);
}

// Blocks written then read twice through fewer frames (every block gets a
// frame and gives it up several times).
ProgramBuilder CyclingProgram(int blocks) {
  ProgramBuilder program;
  program.Alloc(0, blocks);
  for (int round = 0; round < 2; ++round) {
    for (int block = 0; block < blocks; ++block) {
      program.Kernel(10 + block, 0, {block}, /*write=*/true);
    }
    for (int block = 0; block < blocks; ++block) program.Kernel(30 + block, 0, {block});
  }
  return program;
}

// Twelve blocks through three frames, written then read twice: every
// block gets a frame and gives it up several times. Device memory (the
// device file's allocated bytes, as the kernel counts them) must never
// exceed the capacity, however many blocks the program has; before frames
// were released it grew to all twelve.
void ExpectDeviceMemoryWithinCapacity(const UffdOptions& options) {
  constexpr int kBlocks = 12;
  constexpr uint64_t kFrames = 3;
  ProgramBuilder program = CyclingProgram(kBlocks);
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, kFrames, policy, TestDevice(4), options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.slots, uint64_t{kBlocks});  // host copies: the footprint
  EXPECT_GE(run.stats.evictions, 4u * kBlocks - kFrames);
  EXPECT_EQ(run.counters.peak_frames_held, kFrames);
  EXPECT_LE(run.counters.peak_device_bytes, kFrames * kBlockSize);
  // Not vacuous: a frame's memory was measured full before its release.
  EXPECT_EQ(run.counters.peak_device_bytes % kBlockSize, 0u);
  EXPECT_GE(run.counters.peak_device_bytes, kBlockSize);
  EXPECT_LE(run.counters.frames_held, kFrames);
  EXPECT_LE(run.counters.device_bytes, run.counters.frames_held * kBlockSize);
}

TEST(UffdMemory, DeviceMemoryStaysWithinCapacity) {
  ExpectDeviceMemoryWithinCapacity(VerifiedUffdOptions());
}

// The tmpfs directory the device_dir tests use: $UMLAB_TEST_DEVICE_DIR (to
// run them on a mount with huge=within_size, whose 2 MiB folios are the
// option's point), else /dev/shm; empty if that is not a tmpfs.
std::string TestDeviceDir() {
  const char* given = std::getenv("UMLAB_TEST_DEVICE_DIR");
  const std::string dir = given != nullptr && *given != '\0' ? given : "/dev/shm";
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0 || fs.f_type != TMPFS_MAGIC) return "";
  return dir;
}

TEST(UffdMemory, DeviceMemoryInATmpfsDirectoryStaysWithinCapacity) {
  const std::string dir = TestDeviceDir();
  if (dir.empty()) GTEST_SKIP() << "no tmpfs at $UMLAB_TEST_DEVICE_DIR or /dev/shm";
  UffdOptions options = VerifiedUffdOptions();
  options.device_dir = dir;
  ExpectDeviceMemoryWithinCapacity(options);
}

TEST(UffdMemory, ADeviceDirectoryThatIsNotATmpfsIsRefusedWithTheWayOut) {
  UffdOptions options = VerifiedUffdOptions();
  options.device_dir = "/proc";
  ProgramBuilder program = CyclingProgram(2);
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 1, policy, TestDevice(4), options);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(run.status.message()),
              ::testing::HasSubstr("device_dir=/proc is not a tmpfs mount"));
  EXPECT_THAT(std::string(run.status.message()), ::testing::HasSubstr("huge=within_size"));
}

// Waits up to 20 s for `done`; false if it never came (the caller then
// releases the device, which frees any thread stalled in a fault).
template <typename Fn>
bool WaitFor(Fn done) {
  for (int i = 0; i < 20000 && !done(); ++i) usleep(1000);
  return done();
}

TEST(UffdMemory, ReleasedFrameTakesANewMigrationWithoutAFaultLoop) {
  // A frame's device memory is released (fallocate PUNCH_HOLE) when its
  // block gives it up, and a later migration of the block fills the slot
  // afresh. Serviced as the backend does (copy in, map write-protected,
  // wake; a first write lifts the protection), an accessor of the released
  // slot must fault once per page and then read the bytes written before
  // the release: a second fault on a page already mapped would be the
  // re-fault loop of a page table that lost the new mapping.
  auto created = UffdDevice::Create({.max_blocks = 2, .name = "umlab-uffd-test"});
  ASSERT_TRUE(created.ok()) << created.status();
  UffdDevice& d = **created;
  ASSERT_TRUE(d.AddSlots(1).ok());
  const PageMask all = FullPageMask();
  constexpr int kWords = kPageSize / 8;
  auto pattern = [](int page, int word) { return uint64_t(page) << 32 | uint64_t(word) | 1; };

  // Fill the frame through a writable mapping, write it home, release it.
  ASSERT_TRUE(d.CopyIn(0, PageMask(), all).ok());
  ASSERT_TRUE(d.Map(0, all, /*write_protect=*/false).ok());
  for (int page = 0; page < kPagesPerBlock; ++page) {
    auto* words = reinterpret_cast<uint64_t*>(d.DevicePage(0, page));
    for (int w = 0; w < kWords; ++w) words[w] = pattern(page, w);
  }
  ASSERT_TRUE(d.Unmap(0, all).ok());
  ASSERT_TRUE(d.CopyOut(0, all).ok());
  ASSERT_TRUE(d.ReleaseFrame(0).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), 0u);

  std::atomic<int> misses{0}, write_faults{0};
  std::atomic<bool> migrated{false};
  ASSERT_TRUE(d.StartReader([&](const UffdFault& fault) {
                 if (fault.write_protect) {
                   ++write_faults;
                   EXPECT_TRUE(d.AllowWrite(fault.offset).ok());
                   return;
                 }
                 ++misses;
                 if (!migrated.exchange(true)) {  // the whole block, once
                   EXPECT_TRUE(d.CopyIn(0, all, PageMask()).ok());
                   EXPECT_TRUE(d.Map(0, all, /*write_protect=*/true).ok());
                 }
                 EXPECT_TRUE(d.Wake(fault.offset & ~(kPageSize - 1), kPageSize).ok());
               }).ok());
  std::atomic<uint64_t> wrong{0};
  std::atomic<bool> finished{false};
  std::thread accessor([&] {
    for (int page = 0; page < kPagesPerBlock; ++page) {
      const auto* words = reinterpret_cast<const volatile uint64_t*>(d.DevicePage(0, page));
      for (int w = 0; w < kWords; ++w) wrong += words[w] != pattern(page, w);
    }
    *reinterpret_cast<volatile uint64_t*>(d.DevicePage(0, 7)) = 42;
    finished = true;
  });
  const bool done = WaitFor([&] { return finished.load(); });
  if (!done) d.Release();  // frees the accessor from its fault
  accessor.join();
  d.StopReader();
  ASSERT_TRUE(done) << "the accessor never finished: " << misses.load() << " misses";
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(misses.load(), 1);  // the first touch; every other page was mapped with it
  EXPECT_EQ(write_faults.load(), 1);
  EXPECT_EQ(d.DeviceBytesAllocated(), kBlockSize);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(d.DevicePage(0, 7)), 42u);
}

TEST(UffdMemory, CopiesMixPagesThatHoldMemoryWithPagesThatDoNot) {
  // The device copies pages that hold memory through its staging alias and
  // the others through the file (write(2) allocates them). One CopyIn with
  // both kinds, copied and zero-filled, must land every byte where it
  // belongs, allocate only the pages it fills, and CopyOut must read back
  // what the SM side wrote.
  auto created = UffdDevice::Create({.max_blocks = 2, .name = "umlab-uffd-test"});
  ASSERT_TRUE(created.ok()) << created.status();
  UffdDevice& d = **created;
  ASSERT_TRUE(d.AddSlots(1).ok());
  constexpr int kWords = kPageSize / 8;
  auto pattern = [](int page, int word) { return uint64_t(page) << 32 | uint64_t(word) | 1; };
  auto fill = [&](const PageMask& pages, uint64_t salt) {
    ForEachPageRun(pages, [&](int first, int count) {
      for (int page = first; page < first + count; ++page) {
        auto* words = reinterpret_cast<uint64_t*>(d.DevicePage(0, page));
        for (int w = 0; w < kWords; ++w) words[w] = pattern(page, w) ^ salt;
      }
    });
  };
  const PageMask first_half = PageRangeMask(0, 256);
  // Pages 0-255 take memory (zero-filled through the file), the SM side
  // writes them, and they go home (through the alias).
  ASSERT_TRUE(d.CopyIn(0, PageMask(), first_half).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), 256 * kPageSize);
  ASSERT_TRUE(d.Map(0, first_half, /*write_protect=*/false).ok());
  fill(first_half, 0);
  ASSERT_TRUE(d.Unmap(0, first_half).ok());
  ASSERT_TRUE(d.CopyOut(0, first_half).ok());
  // Stale bytes in the frame, never written home: the next copy must
  // replace them.
  ASSERT_TRUE(d.Map(0, first_half, /*write_protect=*/false).ok());
  fill(first_half, ~uint64_t{0});
  ASSERT_TRUE(d.Unmap(0, first_half).ok());
  // Copy 0-127 (memory held: the alias), zero 128-383 (128-255 held: the
  // alias; 256-383 not: the file). 384-511 stay without memory.
  ASSERT_TRUE(d.CopyIn(0, PageRangeMask(0, 128), PageRangeMask(128, 256)).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), 384 * kPageSize);
  ASSERT_TRUE(d.Map(0, PageRangeMask(0, 384), /*write_protect=*/true).ok());
  uint64_t wrong = 0;
  for (int page = 0; page < 384; ++page) {
    const auto* words = reinterpret_cast<const uint64_t*>(d.DevicePage(0, page));
    for (int w = 0; w < kWords; ++w) wrong += words[w] != (page < 128 ? pattern(page, w) : 0);
  }
  EXPECT_EQ(wrong, 0u);
  ASSERT_TRUE(d.Unmap(0, PageRangeMask(0, 384)).ok());
  ASSERT_TRUE(d.ReleaseFrame(0).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), 0u);
}

// The start of the device range (slot 0), read from /proc/self/smaps: tests
// use it to act on the page table behind the backend's back, as the kernel
// may. The device memfd is mapped twice (the device range and the
// unregistered staging alias); the device range is the mapping whose
// VmFlags show userfaultfd registration ("um": missing faults).
uint64_t DeviceRangeStart() {
  uint64_t start = 0;
  if (FILE* f = std::fopen("/proc/self/smaps", "r")) {
    char line[512];
    uint64_t candidate = 0;
    while (start == 0 && std::fgets(line, sizeof line, f) != nullptr) {
      const std::string text(line);
      if (text.find("/memfd:umlab-uffd (deleted)") != std::string::npos) {
        candidate = std::strtoull(line, nullptr, 16);
      } else if (candidate != 0 && text.rfind("VmFlags:", 0) == 0) {
        if (text.find(" um") != std::string::npos) start = candidate;
        candidate = 0;
      }
    }
    std::fclose(f);
  }
  return start;
}

// Runs `hook` on the run thread just before event `index` is read: between
// kernels, while the SM threads are idle.
class HookedSource final : public EventSource {
 public:
  HookedSource(EventSource& inner, size_t index, std::function<void()> hook)
      : inner_(inner), index_(index), hook_(std::move(hook)) {}
  bool Next(Event& event) override {
    if (read_++ == index_) hook_();
    return inner_.Next(event);
  }

 private:
  EventSource& inner_;
  size_t index_;
  std::function<void()> hook_;
  size_t read_ = 0;
};

TEST(UffdMemory, AMappingTheKernelDroppedIsRestoredNotFaultedForever) {
  // The kernel may take a mapped page's entry away on its own (reclaim to
  // swap, say). The engine then sees faults on resident pages, migrates
  // nothing and replays; unless the backend maps the page again, its
  // accessor faults forever. Here every entry of a written block is dropped
  // between two kernels (MADV_DONTNEED, the bytes stay in device memory):
  // the reading kernel must restore each page once, read what was written,
  // and move no data.
  ProgramBuilder program;
  program.Alloc(0, 1).Kernel(1, 0, {0}, /*write=*/true);
  const size_t second_kernel = program.events().size();
  program.Kernel(2, 0, {0});
  VectorSource inner = program.Source();
  bool dropped = false;
  HookedSource source(inner, second_kernel, [&] {
    const uint64_t start = DeviceRangeStart();
    dropped = start != 0 && madvise(reinterpret_cast<void*>(start), kBlockSize, MADV_DONTNEED) == 0;
  });
  UffdOptions options = VerifiedUffdOptions();
  options.watchdog_s = 10;  // the loop, if it came back, fails here instead of hanging
  DemandPolicy policy;
  const UffdRun run = RunOnUffd(source, 1, policy, TestDevice(4), options);
  ASSERT_TRUE(dropped);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.restored_mappings, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.pages_checked, uint64_t{kPagesPerBlock});
  EXPECT_EQ(run.stats.h2d_bytes, 0u);  // zero-filled once, never copied
  EXPECT_EQ(run.stats.evictions, 0u);
}

TEST(UffdMemory, HugeFramesRoundTripWholeBlocksAndRefuseParts) {
  // Needs 2 MiB pages reserved in vm.nr_hugepages, which umlab never does
  // itself; skipped (with the reason) where the pool is empty.
  if (UffdDevice::FreeHugePages() < 2) GTEST_SKIP() << "no free 2 MiB huge pages";
  auto device =
      UffdDevice::Create({.max_blocks = 4, .name = "umlab-uffd-test", .huge_pages = true});
  ASSERT_TRUE(device.ok()) << device.status();
  UffdDevice& d = **device;
  ASSERT_TRUE(d.AddSlots(2).ok());
  const PageMask all = FullPageMask();
  // Zero-filled frame, mapped writable: the SM side writes a pattern.
  ASSERT_TRUE(d.CopyIn(0, PageMask(), all).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), kBlockSize);  // one huge page, whole
  ASSERT_TRUE(d.Map(0, all, /*write_protect=*/false).ok());
  auto* words = reinterpret_cast<uint64_t*>(d.DevicePage(0, 0));
  for (uint64_t i = 0; i < kBlockSize / 8; ++i) EXPECT_EQ(words[i], 0u) << i;
  for (uint64_t i = 0; i < kBlockSize / 8; ++i) words[i] = i * 0x9e3779b97f4a7c15u;
  // The hugetlb page table has 2 MiB granularity: parts are refused.
  EXPECT_EQ(d.Unmap(0, PageRangeMask(0, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.Map(1, PageRangeMask(3, 5), false).code(), absl::StatusCode::kInvalidArgument);
  // Write back, release, and bring the bytes back into a fresh huge page.
  ASSERT_TRUE(d.Unmap(0, all).ok());
  ASSERT_TRUE(d.CopyOut(0, all).ok());
  ASSERT_TRUE(d.ReleaseFrame(0).ok());
  EXPECT_EQ(d.DeviceBytesAllocated(), 0u);
  ASSERT_TRUE(d.CopyIn(0, all, PageMask()).ok());
  ASSERT_TRUE(d.Map(0, all, /*write_protect=*/true).ok());
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < kBlockSize / 8; ++i) wrong += words[i] != i * 0x9e3779b97f4a7c15u;
  EXPECT_EQ(wrong, 0u);
  ASSERT_TRUE(d.Unmap(0, all).ok());
  ASSERT_TRUE(d.ReleaseFrame(0).ok());
}

// Demand paging at 2 MiB: a fault brings its whole block, as huge frames need.
class WholeBlockPolicy final : public Policy {
 public:
  PageMask ExpandFault(BlockNumber, const PageMask&) override { return FullPageMask(); }
};

TEST(UffdHugeFrames, WholeBlockRunVerifiesWithTheSameTrafficAsSmallPages) {
  constexpr uint64_t kFrames = 3;
  if (UffdDevice::FreeHugePages() < kFrames) GTEST_SKIP() << "no free 2 MiB huge pages";
  ProgramBuilder program = CyclingProgram(8);
  UffdOptions huge = VerifiedUffdOptions();
  huge.huge_pages = true;
  WholeBlockPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, kFrames, policy, TestDevice(4), huge);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_TRUE(run.counters.huge_frames);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_EQ(run.counters.pages_checked, 16u * kPagesPerBlock);
  EXPECT_LE(run.counters.peak_device_bytes, kFrames * kBlockSize);
  // The 4 KiB path, same program and policy: the same blocks move. (Whole
  // blocks are written here, so per-2-MiB dirty bits write back no more.)
  WholeBlockPolicy small_policy;
  VectorSource small_source = program.Source();
  const UffdRun small =
      RunOnUffd(small_source, kFrames, small_policy, TestDevice(4), VerifiedUffdOptions());
  ASSERT_TRUE(small.status.ok()) << small.status;
  EXPECT_FALSE(small.counters.huge_frames);
  EXPECT_EQ(run.stats.h2d_bytes, small.stats.h2d_bytes);
  EXPECT_EQ(run.stats.d2h_bytes, small.stats.d2h_bytes);
  EXPECT_EQ(run.stats.evictions, small.stats.evictions);
  EXPECT_GE(run.stats.evictions, 4u * 8 - kFrames);
}

TEST(UffdHugeFrames, PartialMigrationFailsTheRunWithTheWayOut) {
  if (UffdDevice::FreeHugePages() < 2) GTEST_SKIP() << "no free 2 MiB huge pages";
  ProgramBuilder program = CyclingProgram(2);
  UffdOptions huge = VerifiedUffdOptions();
  huge.huge_pages = true;
  DemandPolicy policy;  // one 4 KiB page per fault: cannot be a PMD
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 2, policy, TestDevice(4), huge);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kFailedPrecondition) << run.status;
  EXPECT_NE(run.status.message().find("drop huge_pages"), absl::string_view::npos)
      << run.status;
}

// A kernel that takes long enough to be interrupted.
ProgramBuilder LongProgram(int kernels) {
  ProgramBuilder program;
  program.Alloc(0, 8);
  for (int i = 0; i < kernels; ++i) program.Kernel(1 + i % 8, 0, {0, 1, 2, 3, 4, 5, 6, 7}, i % 2);
  return program;
}

// SMs that a replay wakes together fault together one step later, and on the
// sim they share a batch (the engine fetches once every SM faulting at that
// instant has). The uffd service gathers the same batch from threads that
// arrive tens of microseconds apart, however the host schedules them.
TEST(UffdBatching, SmsThatFaultAtOneInstantShareABatchAsOnTheSim) {
  constexpr int kSms = 8;
  constexpr int kRounds = 8;
  ProgramBuilder program;
  program.Alloc(0, 1)
      .Begin(1, 0)
      .Access(ProgramBuilder::BlockAddress(0), kSms * kRounds * kPageSize, /*write=*/false)
      .End(1);
  // The preset's 45 us fault latency and link, dilated so that the
  // gathering window (one fault latency) is 45 ms: far longer than any
  // thread waits for a core, so the count below cannot depend on the host.
  DeviceConfig device = *DevicePreset("v100-pcie3");
  device.compute.sm_count = kSms;
  UffdOptions options;
  options.sms = kSms;
  options.dilation = 1000;
  options.verify = true;
  options.watchdog_s = 60;
  DemandPolicy policy;
  VectorSource source = program.Source();
  const UffdRun run = RunOnUffd(source, 1, policy, device, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  const SimRun sim = RunOnSim(program, 1, policy, device);
  ASSERT_TRUE(sim.status.ok()) << sim.status;
  // Demand moves exactly the faulted page, so each round's eight pages
  // fault, once each, in one batch.
  EXPECT_EQ(sim.stats.faults, uint64_t{kSms * kRounds});
  EXPECT_EQ(sim.stats.fault_batches, uint64_t{kRounds});
  EXPECT_EQ(run.stats.faults, sim.stats.faults);
  EXPECT_EQ(run.stats.fault_batches, sim.stats.fault_batches);
  // Every batch was gathered by the rule, none by the window running out.
  EXPECT_EQ(run.counters.ungathered_batches, 0u);
  EXPECT_EQ(run.counters.corrupted_words, 0u);
}

TEST(UffdTeardown, SigintStopsTheRunAndLeavesNothingBehind) {
  const int threads_before = CountEntries("/proc/self/task");
  const int fds_before = CountEntries("/proc/self/fd");
  absl::Status status;
  {
    absl::StatusOr<std::unique_ptr<UffdBackend>> backend =
        UffdBackend::Create(TestDevice(4), 2, VerifiedUffdOptions());
    ASSERT_TRUE(backend.ok()) << backend.status();
    DemandPolicy policy;
    Engine engine(**backend, policy, 2, EngineConfig());
    ProgramBuilder program = LongProgram(200);
    VectorSource source = program.Source();
    UffdBackend* raw = backend->get();
    std::thread interrupter([raw] {
      while (raw->progress() < 20000) usleep(1000);
      kill(getpid(), SIGINT);
    });
    status = (*backend)->Run(source, engine, nullptr);
    interrupter.join();
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(CountEntries("/proc/self/task"), threads_before);
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds_before);
  EXPECT_EQ(CountDeviceMappings(), 0);
}

TEST(UffdTeardown, AnErrorMidRunLeavesNothingBehind) {
  const int threads_before = CountEntries("/proc/self/task");
  // A kernel end without its begin, after real work has been done.
  ProgramBuilder program = LongProgram(4);
  program.End(99);
  DemandPolicy policy;
  VectorSource source = program.Source();
  UffdOptions options = VerifiedUffdOptions();
  const UffdRun run = RunOnUffd(source, 2, policy, TestDevice(4), options);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument) << run.status;
  EXPECT_EQ(CountEntries("/proc/self/task"), threads_before);
  EXPECT_EQ(CountDeviceMappings(), 0);
}

// Answers its first fault only after `hold`: the engine's lock is held all
// that time, as by a policy or backend call that never returns.
class StuckPolicy final : public Policy {
 public:
  explicit StuckPolicy(absl::Duration hold) : hold_(hold) {}
  PageMask ExpandFault(BlockNumber, const PageMask& faulted) override {
    if (!stuck_once_) {
      stuck_once_ = true;
      absl::SleepFor(hold_);
    }
    return faulted;
  }

 private:
  absl::Duration hold_;
  bool stuck_once_ = false;
};

TEST(UffdTeardown, TheWatchdogFiresWhileACallHoldsTheEngine) {
  // The run thread's checks must not wait for the engine's lock, or a call
  // stuck under it hangs the run for good instead of failing it (the ctest
  // timeout, not the watchdog, then ended a TSan run in CI). The watchdog
  // fires after 0.5 s without progress and 1 s more of a held lock, well
  // before the call gives up after 5 s.
  const int threads_before = CountEntries("/proc/self/task");
  ProgramBuilder program = LongProgram(2);
  StuckPolicy policy(absl::Seconds(5));
  VectorSource source = program.Source();
  UffdOptions options = VerifiedUffdOptions();
  options.watchdog_s = 0.5;
  const UffdRun run = RunOnUffd(source, 2, policy, TestDevice(4), options);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kDeadlineExceeded) << run.status;
  EXPECT_THAT(std::string(run.status.message()),
              ::testing::HasSubstr("held the engine all along"));
  EXPECT_EQ(CountEntries("/proc/self/task"), threads_before);
  EXPECT_EQ(CountDeviceMappings(), 0);
}

TEST(UffdAvailability, UnavailableUserfaultfdGivesOneActionableLine) {
  UffdDevice::SetOpenerForTesting([](bool device_node) { return device_node ? -EACCES : -EPERM; });
  std::ostringstream out, err;
  const int code = cli::Main({"run", "--backend=uffd", "--capacity=1", "--workload=mlp",
                              "--workload-arg",
                              "layers=1,hidden=256,batch=64,iterations=1"},
                             out, err);
  UffdDevice::SetOpenerForTesting(nullptr);
  EXPECT_EQ(code, 1);
  const std::string message = err.str();
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
  EXPECT_NE(message.find("userfaultfd is unavailable"), std::string::npos) << message;
  EXPECT_NE(message.find("Operation not permitted"), std::string::npos) << message;
  EXPECT_NE(message.find("/dev/userfaultfd: Permission denied"), std::string::npos) << message;
  EXPECT_NE(message.find("--backend=sim"), std::string::npos) << message;
}

TEST(UffdAvailability, FallsBackToTheDeviceNode) {
  int calls = 0;
  UffdDevice::SetOpenerForTesting([&calls](bool device_node) -> int {
    ++calls;
    if (!device_node) return -ENOSYS;
    return static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  });
  absl::StatusOr<std::unique_ptr<UffdDevice>> device = UffdDevice::Create({});
  UffdDevice::SetOpenerForTesting(nullptr);
  EXPECT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(calls, 2);
}

TEST(UffdCli, VerifyAndDilationAreUffdOptions) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::Main({"run", "--backend=sim", "--verify"}, out, err), 2);
  EXPECT_NE(err.str().find("has no parameter 'verify'"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::Main({"run", "--backend=sim", "--dilation=4"}, out2, err2), 2);
  EXPECT_NE(err2.str().find("has no parameter 'dilation'"), std::string::npos) << err2.str();
  std::ostringstream out3, err3;
  // Out of the declared range: a usage error before the backend is made.
  EXPECT_EQ(cli::Main({"run", "--backend=uffd", "--dilation=0"}, out3, err3), 2);
  EXPECT_NE(err3.str().find("dilation=0 is out of range; allowed: (0, inf)"), std::string::npos)
      << err3.str();
}

TEST(UffdCli, RecordOnUffdReplaysOnSim) {
  const std::string path = umlab::testing::PrivateTempPath("uffd_record.umt");
  const std::vector<std::string> workload = {"--workload=mlp", "--workload-arg",
                                             "layers=2,hidden=512,batch=256,iterations=2"};
  std::vector<std::string> record = {"record", "--backend=uffd", "--dilation=1", "--verify",
                                     "--capacity=0.5", "--format=json", "--output=" + path};
  record.insert(record.end(), workload.begin(), workload.end());
  std::ostringstream out, err;
  ASSERT_EQ(cli::Main(record, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("\"backend\":\"uffd\""), std::string::npos) << out.str();
  std::ostringstream inspect_out, inspect_err;
  ASSERT_EQ(cli::Main({"inspect", path, "--format=json"}, inspect_out, inspect_err), 0)
      << inspect_err.str();
  EXPECT_NE(inspect_out.str().find("\"fault\":"), std::string::npos) << inspect_out.str();
  EXPECT_NE(inspect_out.str().find("\"backend\":\"uffd:dilation=1,verify=true\""),
            std::string::npos)
      << inspect_out.str();
  std::ostringstream replay_out, replay_err;
  ASSERT_EQ(cli::Main({"replay", path, "--backend=sim", "--capacity=0.5", "--format=json"},
                      replay_out, replay_err),
            0)
      << replay_err.str();
  EXPECT_NE(replay_out.str().find("\"backend\":\"sim\""), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace umlab::testing
