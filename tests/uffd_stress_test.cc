// The uffd device under stress, after the kernel's own userfaultfd stress
// test (tools/testing/selftests/mm/uffd-stress.c): many threads touch a
// range far larger than the device at random, and every byte is checked.
//
// 8 SM threads, a device of 4 frames, random 4 KiB reads and writes over 40
// blocks (10x the capacity), a fault buffer of 4 entries (fewer than the
// threads, so it overflows and dropped accessors must re-fault after a
// replay). The throttle is off: this tests correctness and liveness, not
// timing. Under the sanitizers a scaled-down version runs (20% of the
// accesses, 10% under ThreadSanitizer); see kAccesses.
#include <random>

#include "gtest/gtest.h"
#include "policies/demand/demand.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"
#include "tests/sanitized_build.h"
#include "tests/uffd_harness.h"

namespace umlab::testing {
namespace {

constexpr int kBlocks = 40;
constexpr uint64_t kCapacityFrames = 4;
constexpr int kAccessesPerKernel = 4096;
// With 40 blocks over 4 frames at least 9 in 10 random accesses miss. Each
// miss is one page fault or more: a fault the full buffer dropped is raised
// again after the next replay. 250 K accesses raise about 600 K faults, of
// which about 290 K reach the engine (the bounds asserted: 400 K and 200 K);
// that is 40 s here, the longest case of the suite (bench/uffd_soak runs
// the same program for as long as asked). Under sanitizers (several times
// slower per access) 50 K accesses, and 25 K under ThreadSanitizer, where
// 100 K took 79 s and 50 K 57 s, the longest case of CI's TSan stage (the
// first kernel writes all 40 blocks, a fixed part). The fault bounds scale
// with the accesses (100 K raised about 230 K faults under ASan).
constexpr uint64_t kAccesses = kThreadSanitized ? 25000 : kSanitized ? 50000 : 250000;
constexpr uint64_t kMinFaults = kThreadSanitized ? 37500 : kSanitized ? 75000 : 400000;
constexpr uint64_t kMinServiced = kThreadSanitized ? 17500 : kSanitized ? 35000 : 200000;

// An init kernel that writes every page, then kernels of random single-page
// reads and writes, generated on the fly (a million events would not fit
// comfortably in a vector).
class RandomProgram final : public EventSource {
 public:
  explicit RandomProgram(uint64_t accesses) : accesses_(accesses) {
    builder_.Alloc(0, kBlocks).Kernel(1, 0, BlockList(), /*write=*/true);
  }
  bool Next(Event& event) override {
    if (prefix_ < builder_.events().size()) {
      event = builder_.events()[prefix_++];
      return true;
    }
    if (emitted_ == accesses_ && in_kernel_ == 0) return false;
    event = Event();
    if (in_kernel_ == 0) {
      event.kind = EventKind::kKernelBegin;
      event.exec_id = 2;
      in_kernel_ = 1;
      left_in_kernel_ = std::min<uint64_t>(kAccessesPerKernel, accesses_ - emitted_);
      return true;
    }
    if (left_in_kernel_ == 0) {
      event.kind = EventKind::kKernelEnd;
      event.exec_id = 2;
      in_kernel_ = 0;
      return true;
    }
    event = ProgramBuilder::RandomPageAccess(rng_, kBlocks);
    --left_in_kernel_;
    ++emitted_;
    return true;
  }

 private:
  static std::vector<int> BlockList() {
    std::vector<int> blocks;
    for (int b = 0; b < kBlocks; ++b) blocks.push_back(b);
    return blocks;
  }
  ProgramBuilder builder_;
  size_t prefix_ = 0;
  uint64_t accesses_;
  uint64_t emitted_ = 0;
  int in_kernel_ = 0;
  uint64_t left_in_kernel_ = 0;
  std::mt19937_64 rng_{20240601};
};

TEST(UffdStress, RandomAccessOverTenTimesCapacity) {
  const int threads_before = CountEntries("/proc/self/task");
  const int fds_before = CountEntries("/proc/self/fd");
  DeviceConfig device = TestDevice(8);
  device.fault_buffer_entries = 4;
  device.fault_batch_size = 4;
  UffdOptions options;
  options.sms = 8;
  options.throttle = false;
  options.verify = true;
  options.watchdog_s = 60;  // a deadlock fails the test instead of hanging it
  DemandPolicy policy;
  RandomProgram program(kAccesses);
  const UffdRun run = RunOnUffd(program, kCapacityFrames, policy, device, options);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.counters.corrupted_words, 0u);
  EXPECT_GE(run.counters.pages_checked, kAccesses / 3);
  EXPECT_GE(run.counters.received_faults, kMinFaults);
  EXPECT_GE(run.stats.faults, kMinServiced);
  EXPECT_GT(run.stats.dropped_faults, 0u) << "the fault buffer never overflowed";
  // Every fault raised was serviced, dropped, or flushed by a replay.
  EXPECT_GE(run.counters.received_faults, run.stats.faults + run.stats.dropped_faults);
  EXPECT_GT(run.stats.evictions, kMinServiced / 2);
  EXPECT_EQ(run.stats.page_accesses, kAccesses + uint64_t{kBlocks} * kPagesPerBlock);
  EXPECT_LE(run.stats.peak_used_frames, kCapacityFrames);
  // Everything the run started is gone.
  EXPECT_EQ(CountEntries("/proc/self/task"), threads_before);
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds_before);
  EXPECT_EQ(CountDeviceMappings(), 0);
  std::printf("faults raised %llu, serviced %llu, dropped %llu, evictions %llu, "
              "pages checked %llu\n",
              static_cast<unsigned long long>(run.counters.received_faults),
              static_cast<unsigned long long>(run.stats.faults),
              static_cast<unsigned long long>(run.stats.dropped_faults),
              static_cast<unsigned long long>(run.stats.evictions),
              static_cast<unsigned long long>(run.counters.pages_checked));
}

}  // namespace
}  // namespace umlab::testing
