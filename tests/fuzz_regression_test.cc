// Inputs the libFuzzer targets (tests/fuzz, docs/fuzzing.md) showed to be
// mishandled, one case per bug. Each failed before its fix.
#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/runner/experiment.h"
#include "core/byte_size.h"
#include "core/memory_units.h"
#include "core/param_map.h"
#include "emu/device_presets.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;

// byte_size: the fuzzer's "10000000000000000000" came back as 2^63, since
// llround() returns a signed value (x86 gives LLONG_MIN on overflow); every
// size from 2^63 bytes to the old 1.8e19 limit was wrong.
TEST(FuzzRegressionTest, ByteSizesAbove2To63AreExact) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize("10000000000000000000");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, uint64_t{10000000000000000000u});
  bytes = ParseByteSize("16777216TiB");  // 2^64 bytes
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("too large"));
}

// byte_size: the fuzzer's --capacity=5 of a 2^63-byte footprint (a trace
// can claim any) converted a double above 2^64 to uint64: undefined
// behaviour, UBSan's float-cast-overflow.
TEST(FuzzRegressionTest, CapacityFractionOfAHugeFootprintIsRejected) {
  for (const char* capacity : {"5\f", "1000"}) {
    absl::StatusOr<uint64_t> frames = cli::ParseCapacityFrames(capacity, uint64_t{1} << 63);
    ASSERT_FALSE(frames.ok()) << capacity;
    EXPECT_THAT(frames.status().message(), HasSubstr("16 EiB"));
  }
  absl::StatusOr<uint64_t> frames = cli::ParseCapacityFrames("1", uint64_t{1} << 62);
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_EQ(*frames, (uint64_t{1} << 62) / kBlockSize);
}

// device_param: the fuzzer's "\t\tbatch=04294967296" passed the "positive"
// check as an int64 and became a batch of 0 in the int field (sms alike);
// inf passed as a rate and as a latency (llround(inf) is LLONG_MIN on x86).
TEST(FuzzRegressionTest, DeviceOverridesOutOfRangeAreRejected) {
  absl::StatusOr<DeviceConfig> preset = DevicePreset("v100-pcie3");
  ASSERT_TRUE(preset.ok());
  for (const char* overrides :
       {"\t\tbatch=04294967296", "sms=4294967296", "batch=2147483648", "h2d_gbps=inf",
        "hbm_gbps=nan", "h2d_gbps=1e300", "link_latency_us=inf", "launch_us=1e300"}) {
    absl::StatusOr<DeviceConfig> c = ApplyDeviceOverrides(*preset, overrides);
    EXPECT_FALSE(c.ok()) << overrides;
  }
  absl::StatusOr<DeviceConfig> c =
      ApplyDeviceOverrides(*preset, "sms=2147483647,link_latency_us=1e12");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->compute.sm_count, 2147483647);
  EXPECT_EQ(c->link.latency_ns, 1000000000000000);
}

// param_spec: a number parameter took "inf" and "nan".
TEST(FuzzRegressionTest, NumberParametersMustBeFinite) {
  const ParamInfo declared[] = {{"x", ParamType::kDouble, "1", "a number"}};
  for (const char* overrides : {"x=inf", "x=-inf", "x=nan"}) {
    absl::StatusOr<ParamMap> params = ParamMap::Resolve(declared, overrides, "test");
    ASSERT_FALSE(params.ok()) << overrides;
    EXPECT_THAT(params.status().message(), HasSubstr("not a valid number value"));
  }
  absl::StatusOr<ParamMap> params = ParamMap::Resolve(declared, "x=1e300", "test");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->Double("x"), 1e300);
}

}  // namespace
}  // namespace umlab
