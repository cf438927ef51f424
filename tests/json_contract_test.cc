// The JSON contract's version (cli/json_contract.h): every document umlab
// writes carries it first, and readers accept any minor version of their
// major and older or unversioned documents, but refuse a newer major version
// in one line.
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/json_contract.h"
#include "cli/report.h"
#include "cli/trace_summary.h"
#include "tests/temp_path.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;

Json Parse(const std::string& text) { return Json::parse(text); }

TEST(JsonContractTest, TheVersionIsMajorDotMinor) {
  EXPECT_EQ(JsonContractVersion(),
            std::to_string(kJsonContractMajor) + "." + std::to_string(kJsonContractMinor));
  EXPECT_EQ(VersionedJsonObject().begin().key(), kJsonContractKey);
}

TEST(JsonContractTest, RunsAndTraceSummariesCarryItFirst) {
  RunResult run;
  run.policy = "demand";
  const Json runs = Parse(RunsJson({run}));
  EXPECT_EQ(runs.begin().key(), kJsonContractKey);
  EXPECT_EQ(runs[kJsonContractKey], JsonContractVersion());
  EXPECT_TRUE(CheckJsonContractVersion(runs, "the output").ok());

  const std::string trace = umlab::testing::PrivateTempPath("contract.umt");
  std::ostringstream out, err;
  ASSERT_EQ(Main({"record", "--output=" + trace, "--workload=mlp", "--workload-arg",
                  "layers=2,hidden=256,batch=64,iterations=2", "--format=json"},
                 out, err),
            kExitOk)
      << err.str();
  EXPECT_EQ(Parse(out.str()).begin().key(), kJsonContractKey);
  absl::StatusOr<TraceSummary> summary = SummarizeTrace(trace);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const Json inspected = Parse(TraceSummaryJson(*summary));
  EXPECT_EQ(inspected.begin().key(), kJsonContractKey);
  EXPECT_EQ(inspected[kJsonContractKey], JsonContractVersion());
  EXPECT_EQ(inspected["version"], 1);  // the .umt format's own version, unchanged
  std::remove(trace.c_str());
}

TEST(JsonContractTest, ReadersTakeOlderAndUnversionedDocumentsAndNewerMinors) {
  for (const std::string& version :
       {std::string("0.3"), JsonContractVersion(),
        std::to_string(kJsonContractMajor) + "." + std::to_string(kJsonContractMinor + 7)}) {
    const Json document = {{kJsonContractKey, version}, {"runs", Json::array()}};
    EXPECT_TRUE(CheckJsonContractVersion(document, "f.json").ok()) << version;
  }
  EXPECT_TRUE(CheckJsonContractVersion(Json{{"runs", Json::array()}}, "f.json").ok());
}

TEST(JsonContractTest, ANewerMajorVersionIsRefusedInOneLine) {
  const std::string newer = std::to_string(kJsonContractMajor + 1) + ".0";
  const absl::Status status =
      CheckJsonContractVersion(Json{{kJsonContractKey, newer}}, "runs.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "runs.json: JSON contract version " + newer +
                " is newer than this umlab reads (up to " + std::to_string(kJsonContractMajor) +
                ".x); upgrade umlab to read it");
}

TEST(JsonContractTest, AMalformedVersionIsAnError) {
  for (const Json& version : {Json("1"), Json("1.0.0"), Json("one.zero"), Json("-1.0"),
                              Json(1.0), Json(nullptr)}) {
    const absl::Status status =
        CheckJsonContractVersion(Json{{kJsonContractKey, version}}, "runs.json");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << version.dump();
    EXPECT_THAT(status.message(), HasSubstr("not a string \"MAJOR.MINOR\"")) << version.dump();
  }
}

}  // namespace
}  // namespace umlab::cli
