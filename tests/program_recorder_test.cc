// Recording a real process as a umlab program (core/program_recorder.h):
// argument words attributed to the allocator's blocks, the read/write rule,
// durations, coverage of observed faults, and a written trace that the sim
// replays.
#include <string>
#include <vector>

#include "core/memory_units.h"
#include "core/program_recorder.h"
#include "gtest/gtest.h"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab {
namespace {

constexpr uint64_t kSegment = 0x7f0000000000;
constexpr uint64_t kMiB = 1 << 20;

std::vector<Event> Accesses(const ProgramRecorder& recorder) {
  std::vector<Event> accesses;
  for (const Event& e : recorder.events()) {
    if (e.kind == EventKind::kAccess) accesses.push_back(e);
  }
  return accesses;
}

// One 20 MiB segment with two blocks: a (1 MiB at the start) and b (2 MiB
// at 4 MiB).
ProgramRecorder TwoBlocks() {
  ProgramRecorder recorder;
  recorder.OnSegment(true, kSegment, 20 * kMiB);
  recorder.OnBlock(true, kSegment, kMiB);
  recorder.OnBlock(true, kSegment + 4 * kMiB, 2 * kMiB);
  return recorder;
}

TEST(ProgramRecorderTest, APointerIntoABlockTouchesTheWholeBlock) {
  ProgramRecorder recorder = TwoBlocks();
  // A view 512 KiB into b, and a scalar that points nowhere.
  recorder.OnLaunch(7, "gemm", {kSegment + 4 * kMiB + 512 * 1024, 42});
  const std::vector<Event> accesses = Accesses(recorder);
  ASSERT_EQ(accesses.size(), 1u);
  EXPECT_EQ(accesses[0].address, kSegment + 4 * kMiB);
  EXPECT_EQ(accesses[0].size, 2 * kMiB);
  EXPECT_EQ(accesses[0].exec_id, 7u);
  EXPECT_EQ(recorder.stats().pointer_words, 1u);
  EXPECT_EQ(recorder.stats().block_words, 1u);
}

TEST(ProgramRecorderTest, TheFirstKernelAfterAllocationWritesLaterOnesRead) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnLaunch(1, "producer", {kSegment});
  recorder.OnLaunch(2, "consumer", {kSegment});
  recorder.OnBlock(false, kSegment, kMiB);
  recorder.OnBlock(true, kSegment, kMiB);  // handed out again: garbage until written
  recorder.OnLaunch(3, "producer_again", {kSegment});
  const std::vector<Event> accesses = Accesses(recorder);
  ASSERT_EQ(accesses.size(), 3u);
  EXPECT_EQ(accesses[0].access, AccessType::kWrite);
  EXPECT_EQ(accesses[1].access, AccessType::kRead);
  EXPECT_EQ(accesses[2].access, AccessType::kWrite);
}

TEST(ProgramRecorderTest, ForeachKernelsWriteEverythingTheyTouch) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnLaunch(1, "init", {kSegment, kSegment + 4 * kMiB});
  recorder.OnLaunch(2, "void at::native::multi_tensor_apply_kernel<...>",
                    {kSegment, kSegment + 4 * kMiB});
  const std::vector<Event> accesses = Accesses(recorder);
  ASSERT_EQ(accesses.size(), 4u);
  EXPECT_EQ(accesses[2].access, AccessType::kWrite);
  EXPECT_EQ(accesses[3].access, AccessType::kWrite);
}

TEST(ProgramRecorderTest, TwoArgumentsIntoOneBlockAreOneAccess) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnLaunch(1, "split", {kSegment, kSegment + 1024, kSegment + 2048});
  EXPECT_EQ(Accesses(recorder).size(), 1u);
  EXPECT_EQ(recorder.stats().block_words, 3u);
}

TEST(ProgramRecorderTest, APointerOutsideEveryBlockTouchesItsSegment) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnLaunch(1, "stray", {kSegment + 10 * kMiB});
  const std::vector<Event> accesses = Accesses(recorder);
  ASSERT_EQ(accesses.size(), 1u);
  EXPECT_EQ(accesses[0].address, kSegment);
  EXPECT_EQ(accesses[0].size, 20 * kMiB);
  EXPECT_EQ(recorder.stats().segment_words, 1u);
}

TEST(ProgramRecorderTest, BlocksOutsideTheRecordedSegmentsAreIgnored) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnBlock(true, 0x1000, 4096);  // PyTorch's own cudaMalloc pool
  recorder.OnLaunch(1, "k", {0x1000});
  EXPECT_TRUE(Accesses(recorder).empty());
  EXPECT_EQ(recorder.stats().foreign_blocks, 1u);
  EXPECT_EQ(recorder.stats().launches_without_access, 1u);
}

TEST(ProgramRecorderTest, FreeingASegmentDeactivatesItsBlocksFirst) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnSegment(false, kSegment, 20 * kMiB);
  const std::vector<Event>& events = recorder.events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[events.size() - 3].kind, EventKind::kDeactivate);
  EXPECT_EQ(events[events.size() - 2].kind, EventKind::kDeactivate);
  EXPECT_EQ(events.back().kind, EventKind::kFree);
  recorder.OnLaunch(1, "late", {kSegment});
  EXPECT_TRUE(Accesses(recorder).empty());
}

TEST(ProgramRecorderTest, KernelsAreDefinedOnceAndCarryTheirDurations) {
  ProgramRecorder recorder = TwoBlocks();
  EXPECT_EQ(recorder.OnLaunch(5, "k", {kSegment}), 0u);
  EXPECT_EQ(recorder.OnLaunch(5, "k", {kSegment}), 1u);
  recorder.SetDuration(1, 2500);
  recorder.SetDuration(9, 100);  // no such launch: ignored
  int defines = 0;
  std::vector<Nanos> durations;
  for (const Event& e : recorder.events()) {
    if (e.kind == EventKind::kKernelDefine) ++defines;
    if (e.kind == EventKind::kKernelBegin) durations.push_back(e.duration_ns);
  }
  EXPECT_EQ(defines, 1);
  EXPECT_EQ(durations, (std::vector<Nanos>{0, 2500}));
  EXPECT_EQ(recorder.stats().timed_launches, 1u);
}

TEST(ProgramRecorderTest, CoverageCountsFaultsInsideTheRunningKernelsBlocks) {
  ProgramRecorder recorder = TwoBlocks();
  recorder.OnLaunch(1, "a", {kSegment});
  recorder.OnLaunch(2, "b", {kSegment + 4 * kMiB});
  const AccessCoverage coverage = recorder.Coverage({{kSegment + 100, 0},
                                                     {kSegment + 100, 1},  // not b's
                                                     {kSegment + 5 * kMiB, 1},
                                                     {kSegment, 7}});
  EXPECT_EQ(coverage.faults, 4u);
  EXPECT_EQ(coverage.explained, 2u);
  EXPECT_EQ(coverage.outside_any_kernel, 1u);
}

TEST(ProgramRecorderTest, TheWrittenTraceReplaysOnTheSim) {
  ProgramRecorder recorder;
  recorder.OnSegment(true, kSegment, 20 * kMiB);
  recorder.OnBlock(true, kSegment, 8 * kMiB);  // a parameter
  recorder.OnLaunch(1, "init", {kSegment});
  for (int iteration = 0; iteration < 2; ++iteration) {
    recorder.OnIteration();
    recorder.OnBlock(true, kSegment + 8 * kMiB, 8 * kMiB);  // an activation
    recorder.SetDuration(recorder.OnLaunch(2, "forward", {kSegment, kSegment + 8 * kMiB}),
                         50'000);
    recorder.SetDuration(recorder.OnLaunch(3, "backward", {kSegment + 8 * kMiB, kSegment}),
                         80'000);
    recorder.OnBlock(false, kSegment + 8 * kMiB, 8 * kMiB);
  }
  const std::string path = testing::PrivateTempPath("recorded.umt");
  ASSERT_TRUE(recorder.Write(path, {{"workload", "recorded"}}).ok());
  const testing::Outcome run = testing::Umlab(
      {"replay", path, "--policy=demand", "--capacity=0.5", "--format=json", "--quiet"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("\"iterations\":2,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"kernels\":5,"), std::string::npos) << run.out;
  // The measured durations are the compute: 2 x (50 + 80) us.
  EXPECT_NE(run.out.find("\"ideal_time_ns\":260000,"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace umlab
