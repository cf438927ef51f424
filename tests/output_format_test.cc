// Output formats: the one JSON writer (escaping, numbers, policy_stats), the
// JSON contract's version (written first everywhere, checked by readers), CSV
// quoting, the one text-table renderer, and --format checked against the
// formats each command's report supports.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/json_contract.h"
#include "cli/report.h"
#include "core/trace_format.h"
#include "cli/text_table.h"
#include "nlohmann/json.hpp"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;

using umlab::testing::Outcome;
using umlab::testing::Umlab;

const std::vector<std::string>& kSmall = umlab::testing::kSmallMlp;

RunResult NamedRun(const std::string& policy) {
  RunResult run;
  run.policy = policy;
  run.backend = "sim";
  run.workload = "mlp";
  run.device = "v100-pcie3";
  run.stats.faults = 7;
  run.stats.per_iteration.push_back(IterationStats{.faults = 7, .time_ns = 1000});
  return run;
}

TEST(OutputFormatTest, JsonEscapesQuotesAndNewlinesInNames) {
  const std::string name = "we\"ird\nname\\with\ttabs\x01";
  const std::string text = RunsJson({NamedRun(name)});
  // Still one run per line: the newline in the name is escaped.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  EXPECT_THAT(text, HasSubstr(R"("policy":"we\"ird\nname\\with\ttabs\u0001")"));
  const nlohmann::json parsed = nlohmann::json::parse(text);
  EXPECT_EQ(parsed["runs"][0]["policy"], name);
  EXPECT_EQ(parsed["runs"][0]["faults"], 7);
}

TEST(OutputFormatTest, PolicyStatsKeepOrderAndPrintNumbersExactly) {
  RunResult run = NamedRun("mine");
  run.policy_stats.AddCount("zeta", 3);
  run.policy_stats.AddReal("alpha", 0.1);
  run.policy_stats.AddReal("whole", 2.0);
  run.policy_stats.AddCount("big", 18446744073709551615ull);
  run.policy_stats.AddCount("zeta", 4);  // a second add updates in place
  const std::string text = RunsJson({run});
  EXPECT_THAT(text, HasSubstr(
      R"("policy_stats":{"zeta":4,"alpha":0.1,"whole":2.0,"big":18446744073709551615}})"));
  // The table carries the same counters.
  EXPECT_THAT(RunsTable({run}),
              HasSubstr("policy stats: mine zeta=4 alpha=0.1 whole=2 big=18446744073709551615\n"));
  // A policy without counters still has the key, so scripts need no guard.
  EXPECT_THAT(RunsJson({NamedRun("plain")}), HasSubstr(R"("policy_stats":{}})"));
}

TEST(OutputFormatTest, CsvQuotesStringsAndKeepsOneRowPerRun) {
  const std::string csv = RunsCsv({NamedRun("deepum:rows=8,assoc=2"), NamedRun("say \"hi\"")});
  const std::vector<std::string> lines = [&] {
    std::vector<std::string> out;
    std::istringstream in(csv);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }();
  ASSERT_EQ(lines.size(), 3u) << csv;
  EXPECT_EQ(lines[0].rfind("policy,backend,workload,device,capacity_bytes,", 0), 0u);
  EXPECT_EQ(lines[1].rfind(R"("deepum:rows=8,assoc=2","sim","mlp","v100-pcie3",0,)", 0), 0u);
  EXPECT_EQ(lines[2].rfind(R"("say ""hi""","sim",)", 0), 0u);
  EXPECT_EQ(std::count(lines[0].begin(), lines[0].end(), ','),
            std::count(lines[1].begin(), lines[1].end(), ',') - 1);  // the quoted comma
}

TEST(OutputFormatTest, TextTableAlignsNamesLeftAndNumbersRight) {
  EXPECT_EQ(RenderTextTable({{"name", "n", "bytes"}, {"a", "12345", "1"}, {"longer", "7"}},
                            /*left_columns=*/1),
            "name        n  bytes\n"
            "--------------------\n"
            "a       12345      1\n"
            "longer      7\n");
  EXPECT_EQ(RenderTextTable({{"case", "metric", "x"}, {"c", "faults", "10"}}, 2),
            "case  metric   x\n"
            "----------------\n"
            "c     faults  10\n");
}

TEST(OutputFormatTest, EachCommandAcceptsOnlyTheFormatsItsReportHas) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--format=xml"},
        std::vector<std::string>{"inspect", "any.umt", "--format=csv"}}) {
    const Outcome outcome = Umlab(args);
    EXPECT_EQ(outcome.code, kExitUsage) << outcome.err;
    EXPECT_THAT(outcome.err, HasSubstr("is not supported here; use table"));
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
    EXPECT_TRUE(outcome.out.empty());
  }
  EXPECT_THAT(Umlab({"run", "--format=xml"}).err, HasSubstr("use table, json or csv"));
  EXPECT_THAT(Umlab({"inspect", "any.umt", "--format=csv"}).err,
              HasSubstr("use table or json"));
  EXPECT_THAT(Umlab({"inspect", "--help"}).out, HasSubstr("json ("));
}

TEST(OutputFormatTest, InspectJsonEscapesThePath) {
  const std::string trace = umlab::testing::PrivateTempPath("odd \"name\".umt");
  std::vector<std::string> record = {"record", "--output=" + trace};
  record.insert(record.end(), kSmall.begin(), kSmall.end());
  ASSERT_EQ(Umlab(record).code, kExitOk);
  const Outcome json = Umlab({"inspect", trace, "--format=json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  const Json parsed = Json::parse(json.out);
  EXPECT_EQ(parsed["file"], trace);
  EXPECT_EQ(parsed["iterations"], 3);
  EXPECT_GT(parsed["events"]["fault"].get<uint64_t>(), 0u);
  // The contract's version first; `version` stays the .umt format's.
  EXPECT_EQ(parsed.begin().key(), kJsonContractKey);
  EXPECT_EQ(parsed[kJsonContractKey], JsonContractVersion());
  EXPECT_EQ(parsed["version"], kTraceVersion);
  std::remove(trace.c_str());
}

TEST(OutputFormatTest, RunsCarryTheContractVersionFirst) {
  EXPECT_EQ(JsonContractVersion(),
            std::to_string(kJsonContractMajor) + "." + std::to_string(kJsonContractMinor));
  const Json runs = Json::parse(RunsJson({NamedRun("demand")}));
  EXPECT_EQ(runs.begin().key(), kJsonContractKey);
  EXPECT_EQ(runs[kJsonContractKey], JsonContractVersion());
  EXPECT_TRUE(CheckJsonContractVersion(runs, "the output").ok());
  EXPECT_EQ(VersionedJsonObject().begin().key(), kJsonContractKey);
}

TEST(OutputFormatTest, ReadersTakeOlderUnversionedAndNewerMinorContracts) {
  for (const std::string& version :
       {std::string("0.3"), JsonContractVersion(),
        std::to_string(kJsonContractMajor) + "." + std::to_string(kJsonContractMinor + 7)}) {
    const Json document = {{kJsonContractKey, version}, {"runs", Json::array()}};
    EXPECT_TRUE(CheckJsonContractVersion(document, "f.json").ok()) << version;
  }
  EXPECT_TRUE(CheckJsonContractVersion(Json{{"runs", Json::array()}}, "f.json").ok());
}

TEST(OutputFormatTest, ReadersRefuseANewerMajorContractInOneLine) {
  const std::string newer = std::to_string(kJsonContractMajor + 1) + ".0";
  const absl::Status status =
      CheckJsonContractVersion(Json{{kJsonContractKey, newer}}, "runs.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "runs.json: JSON contract version " + newer +
                " is newer than this umlab reads (up to " + std::to_string(kJsonContractMajor) +
                ".x); upgrade umlab to read it");
  for (const Json& malformed : {Json("1"), Json("1.0.0"), Json("one.zero"), Json("-1.0"),
                                Json(1.0), Json(nullptr)}) {
    const absl::Status error =
        CheckJsonContractVersion(Json{{kJsonContractKey, malformed}}, "runs.json");
    EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument) << malformed.dump();
    EXPECT_THAT(error.message(), HasSubstr("not a string \"MAJOR.MINOR\"")) << malformed.dump();
  }
}

TEST(OutputFormatTest, PoliciesReportTheirFinalStatsInJsonAndTable) {
  std::vector<std::string> args = {"compare", "--capacity=0.5", "--jobs=1",
                                   "--policies=demand,deepum,uvm-default"};
  args.insert(args.end(), kSmall.begin(), kSmall.end());
  args.push_back("--format=json");
  const Outcome json = Umlab(args);
  ASSERT_EQ(json.code, kExitOk) << json.err;
  const nlohmann::ordered_json runs = nlohmann::ordered_json::parse(json.out)["runs"];
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_TRUE(runs[0]["policy_stats"].empty());
  const auto& deepum = runs[1]["policy_stats"];
  std::vector<std::string> keys;
  for (const auto& item : deepum.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"kernels_predicted", "mispredictions",
                                            "chain_aborts", "blocks_queued", "pre_evictions",
                                            "invalidated_pages", "block_tables"}));
  // Half the footprint: DeepUM learns the kernel sequence and prefetches, and
  // a block table exists per distinct kernel.
  EXPECT_GT(deepum["kernels_predicted"].get<uint64_t>(), 0u);
  EXPECT_GT(deepum["blocks_queued"].get<uint64_t>(), 0u);
  EXPECT_GT(deepum["block_tables"].get<uint64_t>(), 0u);
  // The engine's invalidated bytes are the policy's dropped pages plus the
  // pages of freed segments.
  EXPECT_LE(deepum["invalidated_pages"].get<uint64_t>() * kPageSize,
            runs[1]["invalidated_bytes"].get<uint64_t>());
  const auto& uvm = runs[2]["policy_stats"];
  ASSERT_TRUE(uvm.contains("tree_prefetch_pages"));
  EXPECT_GT(uvm["tree_prefetch_pages"].get<uint64_t>(), 0u);
  EXPECT_TRUE(uvm.contains("pins"));

  args.back() = "--format=table";
  const Outcome table = Umlab(args);
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("policy stats: deepum kernels_predicted="));
  EXPECT_THAT(table.out, HasSubstr("policy stats: uvm-default tree_prefetch_pages="));
}

}  // namespace
}  // namespace umlab::cli
