// The uffd backend does not run a program's copies yet (docs/hum.md): it
// refuses one in a single line that says where to run it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policies/demand/demand.h"
#include "tests/program_builder.h"
#include "tests/uffd_harness.h"

namespace umlab::testing {
namespace {

TEST(UffdCopyTest, RefusesAProgramThatCopiesInOneLine) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(CopyDirection::kHostToDevice, ProgramBuilder::BlockAddress(0), 0x700000000000ull,
         kBlockSize);
  p.Kernel(1, 1000, {0});
  VectorSource source = p.Source();
  DemandPolicy policy;
  UffdOptions options;
  options.throttle = false;
  const UffdRun run = RunOnUffd(source, 4, policy, *DevicePreset("v100-pcie3"), options);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kUnimplemented) << run.status;
  EXPECT_THAT(run.status.message(), ::testing::HasSubstr("--backend=sim"));
  EXPECT_EQ(std::string(run.status.message()).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace umlab::testing
