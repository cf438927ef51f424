// Every registered policy runs mlp on the uffd backend at half capacity
// with every word read checked, over 3 iterations with hundreds of
// evictions, through the CLI (the JSON contract included).
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "cli/commands.h"
#include "core/policy.h"
#include "gtest/gtest.h"
#include "tests/sanitized_build.h"

namespace umlab::testing {
namespace {

uint64_t JsonField(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  if (at == std::string::npos) return 0;
  const size_t start = at + key.size() + 3;
  const size_t end = json.find_first_of(",}", start);
  uint64_t value = 0;
  (void)absl::SimpleAtoi(json.substr(start, end - start), &value);
  return value;
}

// Every policy but those that map pages remotely (memferry), which the uffd
// backend cannot do: the runner refuses them (tests/memferry_test.cc runs
// them on the sim); and memcpy, whose device memory cannot hold mlp at half
// its footprint, where it refuses as cudaMalloc would fail
// (tests/sim_copy_test.cc runs it).
std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const PolicyRegistry::Entry* entry : Policies().Entries()) {
    absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(entry->name);
    if (policy.ok() && (*policy)->MapsRemotely()) continue;
    if (entry->name == "memcpy") continue;
    names.push_back(entry->name);
  }
  return names;
}

class UffdPolicies : public ::testing::TestWithParam<std::string> {};

TEST_P(UffdPolicies, MlpAtHalfCapacityVerifies) {
  // The throttle is off so that CI time goes to faults, not to waiting;
  // `umlab run --backend=uffd --verify` with the throttle on checks the same.
  // Half of mlp's default depth (about 300 MiB) evicts 619-3,204 blocks per
  // run, the fewest under demand; the whole mlp's 14 runs were 207 s of the
  // Release suite's 297 s of test time (ctest -j2, 2 cores), these take
  // about 90 s one after another. The bound keeps the old one's margin (1,000
  // of demand's 1,109): 90%. Under sanitizers a narrower mlp (about 150 MiB)
  // keeps the suite's time in bounds; it still evicts hundreds of blocks.
  const std::string workload = kSanitized ? "layers=4,hidden=1024,batch=512,iterations=3"
                                          : "layers=4,iterations=3";
  uint64_t min_evictions = kSanitized ? 100 : 550;
  std::string capacity = "0.5";
  if (GetParam() == "flashneuron") {
    // FlashNeuron keeps every weight (and mlp's optimizer state) on the
    // device and offloads only activations: it needs 90% of the narrow
    // mlp's footprint and 95% of the half-depth one's (less and it refuses
    // in one line, as the planner tests check). It evicts 24 blocks there,
    // and the bound keeps the old one's margin (100 of 271).
    capacity = kSanitized ? "0.9" : "0.95";
    min_evictions = 10;
  }
  std::ostringstream out, err;
  const int code =
      cli::Main({"run", "--backend=uffd:throttle=false", "--workload=mlp", "--workload-arg",
                 workload, "--capacity=" + capacity, "--policy=" + GetParam(), "--verify",
                 "--format=json"},
                out, err);
  ASSERT_EQ(code, 0) << err.str();
  const std::string json = out.str();
  EXPECT_NE(json.find("\"backend\":\"uffd\""), std::string::npos) << json;
  EXPECT_EQ(JsonField(json, "iterations"), 3u);
  EXPECT_GT(JsonField(json, "time_ns"), 0u);
  // The device really moved data: through faults, or through prefetches. A
  // policy that plans every move ahead (lms) may take no fault at all when
  // the host keeps ahead of the kernels, as it did once under ASan on a
  // loaded machine; that is timing, not a defect.
  EXPECT_GT(JsonField(json, "faults") + JsonField(json, "prefetch_bytes"), 0u) << json;
  EXPECT_GT(JsonField(json, "h2d_bytes") + JsonField(json, "zero_filled_bytes"), 0u);
  if (GetParam() != "ideal") {
    EXPECT_GE(JsonField(json, "evictions"), min_evictions) << json;
  }
}

INSTANTIATE_TEST_SUITE_P(Registered, UffdPolicies, ::testing::ValuesIn(PolicyNames()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace umlab::testing
