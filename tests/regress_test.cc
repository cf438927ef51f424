// `umlab regress` on small suites written by the test: a deliberately worse
// policy fails with a readable diff, --update rewrites the bounds, and a
// broken suite is a usage error.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "tests/temp_path.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A short mlp (two iterations) keeps each case well under a second, even
// under sanitizers.
constexpr char kSmallMlp[] = R"("workload": "mlp", "workload_args": ["layers=4,iterations=3"])";

std::string TempPath(const std::string& name) {
  return umlab::testing::PrivateTempPath(name);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  file << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

struct Result {
  int code;
  std::string out, err;
};

Result Regress(const std::string& path, bool update = false, const std::string& jobs = "") {
  std::ostringstream out, err;
  std::vector<std::string> args = {"regress", path};
  if (update) args.push_back("--update");
  if (!jobs.empty()) args.push_back("--jobs=" + jobs);
  const int code = Main(args, out, err);
  return {code, out.str(), err.str()};
}

std::string OneCaseSuite(const std::string& policy) {
  return std::string(R"({"cases": [{"name": "small", )") + kSmallMlp + R"(, "policy": ")" +
         policy + R"("}]})";
}

TEST(RegressTest, UpdateRecordsBoundsThatThenPass) {
  const std::string path = TempPath("update.json");
  WriteFile(path, OneCaseSuite("deepum"));
  const Result update = Regress(path, /*update=*/true);
  ASSERT_EQ(update.code, kExitOk) << update.out << update.err;
  EXPECT_THAT(update.out, HasSubstr("UPDATED"));
  const std::string rewritten = ReadFile(path);
  EXPECT_THAT(rewritten, HasSubstr("\"steady_faults_per_iteration\""));
  EXPECT_THAT(rewritten, HasSubstr("\"max\""));
  const Result check = Regress(path);
  EXPECT_EQ(check.code, kExitOk) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("4 of 4 bounds passed"));
}

TEST(RegressTest, AWorsePolicyFailsWithAReadableDiff) {
  // Record deepum's bounds, then run the same case with a one-row block
  // table: the correlation tables forget almost everything.
  const std::string path = TempPath("worse.json");
  WriteFile(path, OneCaseSuite("deepum"));
  ASSERT_EQ(Regress(path, /*update=*/true).code, kExitOk);
  std::string suite = ReadFile(path);
  const std::string good = "\"policy\": \"deepum\"";
  ASSERT_NE(suite.find(good), std::string::npos) << suite;
  suite.replace(suite.find(good), good.size(), "\"policy\": \"deepum:rows=1,assoc=1\"");
  WriteFile(path, suite);

  const Result worse = Regress(path);
  EXPECT_EQ(worse.code, kExitFailure) << worse.out << worse.err;
  EXPECT_THAT(worse.out, HasSubstr("FAIL"));
  EXPECT_THAT(worse.out, HasSubstr("regressions:"));
  // The diff names the case, the metric, the value, the bound and the delta.
  EXPECT_THAT(worse.out, HasSubstr("small: steady_faults_per_iteration = "));
  EXPECT_THAT(worse.out, HasSubstr("above its bound"));
  EXPECT_THAT(worse.err, HasSubstr("regression(s)"));

  // --update accepts the worse numbers; the suite passes again.
  ASSERT_EQ(Regress(path, /*update=*/true).code, kExitOk);
  EXPECT_EQ(Regress(path).code, kExitOk);
}

TEST(RegressTest, ToleranceAbsorbsSmallExcess) {
  const std::string path = TempPath("tolerance.json");
  // demand's faults are deterministic; a bound 1% below them fails at 0.5%
  // tolerance and passes at 2%.
  WriteFile(path, OneCaseSuite("demand"));
  ASSERT_EQ(Regress(path, /*update=*/true).code, kExitOk);
  const Result exact = Regress(path);
  ASSERT_EQ(exact.code, kExitOk) << exact.out;
  std::string suite = ReadFile(path);
  const size_t at = suite.find("\"faults\": {");
  ASSERT_NE(at, std::string::npos) << suite;
  const size_t max_at = suite.find("\"max\": ", at) + 7;
  const size_t end = suite.find_first_of(",\n}", max_at);
  const double faults = std::stod(suite.substr(max_at, end - max_at));
  const std::string lowered = std::to_string(static_cast<long long>(faults * 0.99));
  suite.replace(max_at, end - max_at, lowered + ", \"tolerance\": 0.005");
  WriteFile(path, suite);
  EXPECT_EQ(Regress(path).code, kExitFailure);
  suite.replace(suite.find("\"tolerance\": 0.005"), 18, "\"tolerance\": 0.020");
  WriteFile(path, suite);
  EXPECT_EQ(Regress(path).code, kExitOk) << ReadFile(path);
}

TEST(RegressTest, ParallelCasesReportLikeSequentialOnesInSuiteOrder) {
  // Two cases on one workload share one generated program while they run
  // on two threads: the report must not depend on that.
  const std::string path = TempPath("parallel.json");
  WriteFile(path, std::string(R"({"cases": [{"name": "first", )") + kSmallMlp +
                      R"(, "policy": "uvm-default"}, {"name": "second", )" + kSmallMlp +
                      R"(, "policy": "demand"}]})");
  ASSERT_EQ(Regress(path, /*update=*/true, "1").code, kExitOk);
  const Result sequential = Regress(path, /*update=*/false, "1");
  const Result parallel = Regress(path, /*update=*/false, "2");
  ASSERT_EQ(sequential.code, kExitOk) << sequential.out << sequential.err;
  EXPECT_EQ(parallel.code, kExitOk) << parallel.out << parallel.err;
  EXPECT_EQ(parallel.out, sequential.out);
  EXPECT_LT(parallel.out.find("first"), parallel.out.find("second"));
}

TEST(RegressTest, UpdateWritesTheContractVersionFirst) {
  // A tiny mlp (a 4 MiB footprint): this is about the file, not the run.
  const std::string path = TempPath("versioned.json");
  WriteFile(path, R"({"tolerance": 0.02, "contract_version": "1.0", "cases": [
    {"name": "tiny", "workload": "mlp", "policy": "demand",
     "workload_args": ["layers=2,hidden=256,batch=64,iterations=2"]}]})");
  ASSERT_EQ(Regress(path, /*update=*/true).code, kExitOk);
  const std::string rewritten = ReadFile(path);
  EXPECT_EQ(rewritten.rfind("{\n  \"contract_version\": \"1.4\",\n  \"tolerance\"", 0), 0u)
      << rewritten;
  EXPECT_EQ(Regress(path).code, kExitOk);
}

TEST(RegressTest, ASuiteOfANewerMajorVersionIsRefusedInOneLine) {
  const std::string path = TempPath("newer.json");
  WriteFile(path, std::string(R"({"contract_version": "2.0", "cases": [{)") + kSmallMlp +
                      R"(, "policy": "demand"}]})");
  const Result result = Regress(path);
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("JSON contract version 2.0 is newer than this umlab reads"));
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_THAT(result.out, Not(HasSubstr("small")));  // nothing ran
}

TEST(RegressTest, BrokenSuitesAreUsageErrors) {
  const std::string path = TempPath("broken.json");
  WriteFile(path, "{\"cases\": [");
  Result result = Regress(path);
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("not valid JSON"));

  WriteFile(path, std::string(R"({"cases": [{)") + kSmallMlp +
                      R"(, "policy": "demand", "expect": {"speed": {"max": 1}}}]})");
  result = Regress(path);
  EXPECT_EQ(result.code, kExitUsage);
  EXPECT_THAT(result.err, HasSubstr("unknown metric \"speed\""));

  WriteFile(path, OneCaseSuite("no-such-policy"));
  result = Regress(path);
  EXPECT_NE(result.code, kExitOk);
  EXPECT_THAT(result.out + result.err, HasSubstr("no-such-policy"));

  EXPECT_EQ(Regress(TempPath("missing.json")).code, kExitUsage);
  std::ostringstream out, err;
  EXPECT_EQ(Main({"regress"}, out, err), kExitUsage);
}

}  // namespace
}  // namespace umlab::cli
