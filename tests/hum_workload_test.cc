// The copy-then-kernel programs of workloads/hum/ (Parboil, Rodinia and CUDA
// Samples as HUM's evaluation ran them): each runs under the three ways of
// copying (memcpy's DMA, unified memory's host access, hum's hidden copies)
// with every invariant checked, and each moves exactly the bytes its copies
// name. Small sizes keep it fast.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/runner/experiment.h"
#include "cli/trace_summary.h"
#include "core/copy_command.h"
#include "emu/device_presets.h"
#include "tests/temp_path.h"
#include "tests/workload_events.h"

namespace umlab::testing {
namespace {

const std::vector<std::string>& SmallPrograms() {
  static const auto* programs = new std::vector<std::string>{
      "parboil-sgemm:m=256,n=256,k=256",
      "parboil-spmv:rows=20000,nonzeros=200000,launches=3",
      "parboil-lbm:steps=4",
      "parboil-tpacf:sets=10,points=2000",
      "rodinia-cfd:elements=20000,iterations=3",
      "rodinia-srad:rows=512,cols=512",
      "rodinia-pathfinder:cols=20000",
      "cuda-vectoradd:elements=4194304",
      "cuda-matrixmul:launches=5",
      "cuda-blackscholes:options=400000,launches=4",
  };
  return *programs;
}

struct CopyBytes {
  uint64_t in = 0;
  uint64_t out = 0;
  uint64_t copies = 0;
};

CopyBytes CopiesOf(const std::string& spec) {
  CopyBytes bytes;
  for (const Event& event : Drain(spec)) {
    if (event.kind != EventKind::kCopy) continue;
    absl::StatusOr<CopyCommand> copy = CopyOf(event);
    EXPECT_TRUE(copy.ok()) << copy.status();
    if (!copy.ok()) continue;
    ++bytes.copies;
    (copy->to_device() ? bytes.in : bytes.out) += copy->size;
  }
  return bytes;
}

absl::StatusOr<cli::RunResult> RunCopyProgram(const std::string& spec, const std::string& policy) {
  const DeviceConfig device = *DevicePreset("v100-pcie3");
  const auto colon = spec.find(':');
  std::vector<std::string> args;
  if (colon != std::string::npos) args.push_back(spec.substr(colon + 1));
  absl::StatusOr<cli::ProgramInput> program =
      cli::ProgramInput::FromWorkload(spec.substr(0, colon), args, device.compute);
  if (!program.ok()) return program.status();
  cli::RunRequest request;
  request.program = &*program;
  request.device = device;
  request.capacity = "1";
  request.policy = policy;
  request.check_invariants = true;
  return cli::ExecuteRun(request);
}

class CopyProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CopyProgramTest, RunsUnderEveryWayOfCopyingAndMovesWhatItsCopiesName) {
  const CopyBytes copies = CopiesOf(GetParam());
  ASSERT_GT(copies.in, 0u);
  ASSERT_GT(copies.out, 0u);

  absl::StatusOr<cli::RunResult> memcpy = RunCopyProgram(GetParam(), "memcpy");
  ASSERT_TRUE(memcpy.ok()) << memcpy.status();
  EXPECT_EQ(memcpy->stats.copies, copies.copies);
  EXPECT_EQ(memcpy->stats.dma_h2d_bytes, copies.in);
  EXPECT_EQ(memcpy->stats.dma_d2h_bytes, copies.out);
  EXPECT_EQ(memcpy->stats.faults, 0u);  // device memory: nothing faults
  ASSERT_EQ(memcpy->stats.per_iteration.size(), 1u);  // the timed region

  absl::StatusOr<cli::RunResult> um = RunCopyProgram(GetParam(), "uvm-default");
  ASSERT_TRUE(um.ok()) << um.status();
  EXPECT_EQ(um->stats.dma_h2d_bytes + um->stats.dma_d2h_bytes, 0u);
  EXPECT_GT(um->stats.faults, 0u);

  for (const char* policy : {"hum", "hum:sched=false"}) {
    absl::StatusOr<cli::RunResult> hum = RunCopyProgram(GetParam(), policy);
    ASSERT_TRUE(hum.ok()) << policy << ": " << hum.status();
    // Every byte copied in lands through the migration thread, whole
    // pages: at least the bytes, at most a page more per copy end.
    EXPECT_GE(hum->stats.hidden_copy_bytes, copies.in) << policy;
    EXPECT_LE(hum->stats.hidden_copy_bytes, copies.in + 2 * copies.copies * kPageSize) << policy;
    EXPECT_EQ(hum->stats.dma_d2h_bytes, copies.out) << policy;
    EXPECT_EQ(hum->stats.dma_h2d_bytes, 0u) << policy;
  }
}

TEST_P(CopyProgramTest, IsDeterministicAndSaysWhatItIs) {
  absl::StatusOr<cli::RunResult> first = RunCopyProgram(GetParam(), "hum");
  absl::StatusOr<cli::RunResult> second = RunCopyProgram(GetParam(), "hum");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->stats.time_ns, second->stats.time_ns);
  EXPECT_EQ(first->stats.faults, second->stats.faults);
  std::unique_ptr<Workload> workload = MakeWorkload(GetParam());
  ASSERT_NE(workload, nullptr);
  const std::string text = workload->Describe();
  EXPECT_THAT(text, ::testing::HasSubstr("copies"));
  EXPECT_THAT(text, ::testing::HasSubstr("kernels"));
}

// "parboil-lbm:steps=4" -> "parboil_lbm".
std::string ProgramName(const ::testing::TestParamInfo<std::string>& program) {
  std::string name = program.param.substr(0, program.param.find(':'));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Programs, CopyProgramTest, ::testing::ValuesIn(SmallPrograms()),
                         ProgramName);

TEST(CopyProgramTest, ProgramsThatFreeTheirSourceRightAfterItsCopyCannotHideIt) {
  // lbm frees both host grids, cfd deletes its three host arrays, right
  // after their copies (the thesis, §7.1.1): under hum those frees wait for
  // the copies to land, and no kernel goes early, since the copies are
  // done by the time the first one comes.
  for (const char* spec : {"parboil-lbm:steps=4", "rodinia-cfd:elements=20000,iterations=3"}) {
    absl::StatusOr<cli::RunResult> hum = RunCopyProgram(spec, "hum");
    ASSERT_TRUE(hum.ok()) << spec << ": " << hum.status();
    EXPECT_GT(hum->stats.copy_wait_ns, 0) << spec;
    EXPECT_EQ(hum->stats.early_launches, 0u) << spec;
  }
  // vectorAdd writes nothing it copied: its kernel goes before its copies
  // are done, and the host never waits for them.
  absl::StatusOr<cli::RunResult> vectoradd = RunCopyProgram("cuda-vectoradd:elements=4194304", "hum");
  ASSERT_TRUE(vectoradd.ok()) << vectoradd.status();
  EXPECT_EQ(vectoradd->stats.early_launches, 1u);
}

TEST(CopyProgramTest, ARecordedCopyProgramKeepsItsCopiesAndReplaysUnderAnotherPolicy) {
  const std::string path = PrivateTempPath("vectoradd.umt");
  std::ostringstream out, err;
  ASSERT_EQ(cli::Main({"record", "--workload=cuda-vectoradd", "--workload-arg",
                       "elements=1048576", "--capacity=1", "--policy=hum", "--quiet",
                       "--output=" + path},
                      out, err),
            0)
      << err.str();
  absl::StatusOr<cli::TraceSummary> summary = cli::SummarizeTrace(path);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->events["copy"], 3u);
  EXPECT_EQ(summary->copied_in_bytes, 2u * 4 * 1048576);
  EXPECT_EQ(summary->copied_out_bytes, 4u * 1048576);
  std::ostringstream replayed, replay_err;
  EXPECT_EQ(cli::Main({"replay", path, "--policy=memcpy", "--capacity=1", "--quiet",
                       "--format=json"},
                      replayed, replay_err),
            0)
      << replay_err.str();
  EXPECT_NE(replayed.str().find("\"dma_h2d_bytes\":8388608"), std::string::npos)
      << replayed.str();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace umlab::testing
