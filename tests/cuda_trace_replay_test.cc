// A trace recorded by the cuda backend on a real GPU (an H200) replays on
// the sim backend. The fixture is small: a 2-layer mlp, 2 iterations,
// recorded with `bench/cuda_matrix.sh` on the device machine.
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "core/trace_reader.h"

namespace umlab::cli {
namespace {

const std::string kTrace =
    UMLAB_SOURCE_DIR "/tests/data/cuda/mlp_small_h200_demand.umt";

TEST(CudaTraceReplayTest, TheRecordingHoldsRealFaultsOnTheProgramsMemory) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(kTrace);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Metadata("backend"), "cuda");
  uint64_t faults = 0, reserved_low = UINT64_MAX, reserved_high = 0;
  Event event;
  while ((*reader)->Next(event)) {
    if (event.kind == EventKind::kAlloc) {
      reserved_low = std::min(reserved_low, event.address);
      reserved_high = std::max(reserved_high, event.address + event.size);
    }
    if (event.kind == EventKind::kFault) {
      ++faults;
      // CUPTI's device addresses were translated back into the program's.
      EXPECT_GE(event.address, reserved_low);
      EXPECT_LT(event.address, reserved_high);
    }
  }
  ASSERT_TRUE((*reader)->status().ok()) << (*reader)->status();
  EXPECT_GT(faults, 0u);
}

TEST(CudaTraceReplayTest, ReplaysOnTheSimBackend) {
  for (const char* policy : {"demand", "ideal"}) {
    std::ostringstream out, err;
    const int code = Main({"replay", kTrace, std::string("--policy=") + policy,
                           "--capacity=0.5", "--format=json"},
                          out, err);
    ASSERT_EQ(code, kExitOk) << err.str();
    EXPECT_THAT(out.str(), ::testing::HasSubstr("\"backend\":\"sim\""));
    EXPECT_THAT(out.str(), ::testing::HasSubstr("\"workload\":\"mlp\""));
    EXPECT_THAT(out.str(), ::testing::HasSubstr("\"iterations\":2"));
  }
}

}  // namespace
}  // namespace umlab::cli
