// `umlab sweep` and `umlab merge`: grid expansion and names, checks before
// anything is written, resumable job lines, a failing case merged with the
// rest, and a local run through GNU parallel (skipped where it is absent).
// The jobs run the real umlab binary of this build.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/json_text.h"
#include "cli/sweep_grid.h"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kUmlab[] = UMLAB_BINARY_DIR "/cli/umlab";
constexpr char kSmallMlp[] = "layers=2,hidden=512,batch=256,iterations=3";

using ::umlab::testing::IsOneLine;
using ::umlab::testing::Outcome;
using ::umlab::testing::Umlab;

std::string Read(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void Write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A fresh folder per test; removed at the end.
class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = umlab::testing::PrivateTempPath(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path Grid(const std::string& text) {
    const fs::path path = dir_ / "grid.json";
    Write(path, text);
    return path;
  }
  fs::path Results() const { return dir_ / "results"; }
  Outcome Sweep(const fs::path& grid, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"sweep", grid.string(), "--results=" + Results().string(),
                                      std::string("--umlab=") + kUmlab};
    args.insert(args.end(), extra.begin(), extra.end());
    return Umlab(args);
  }

  fs::path dir_;
};

// 5 policies x 2 capacities x 2 devices, as in tests/slurm_sweep.sh. (A
// quarter of this small mlp is a single frame, too few for the h200's 1056
// issuers: the sim reports a deadlock or a livelock there.)
std::string TwentyCaseGrid() {
  return absl::StrCat(R"({"fixed": {"workload": "mlp", "workload-arg": [")", kSmallMlp, R"("]},
   "axes": {"policy": ["demand", "uvm-default", "deepum", "deepum-prefetch", "ideal"],
            "capacity": [0.5, 1.0], "device": ["v100-pcie3", "h200"]},
   "slurm": {"max_running": 4}})");
}

TEST(SweepGridTest, ExpandsTheCartesianProductFirstAxisSlowest) {
  absl::StatusOr<Grid> grid = ParseGrid("g.json", R"({
    "fixed": {"workload": "gpt2-small", "workload-arg:iterations": 2, "backend": "sim"},
    "axes": {"policy": ["demand", "deepum"], "policy-param:rows": [1024, 2048],
             "capacity": [0.25, "8GiB"]}})");
  ASSERT_TRUE(grid.ok()) << grid.status();
  const std::vector<SweepCase> cases = ExpandGrid(*grid);
  ASSERT_EQ(cases.size(), 8u);
  EXPECT_THAT(cases[0].coordinates, ElementsAre(Pair("policy", "demand"),
                                                Pair("policy-param:rows", "1024"),
                                                Pair("capacity", "0.25")));
  EXPECT_THAT(cases[1].coordinates[2], Pair("capacity", "8GiB"));
  EXPECT_THAT(cases[2].coordinates[1], Pair("policy-param:rows", "2048"));
  EXPECT_THAT(cases[4].coordinates[0], Pair("policy", "deepum"));
  EXPECT_THAT(cases[7].args,
              ElementsAre("run", "--workload=gpt2-small", "--workload-arg=iterations=2",
                          "--backend=sim", "--policy=deepum:rows=2048", "--capacity=8GiB",
                          "--format=json"));
}

TEST(SweepGridTest, NamesAreStableSafeAndDistinct) {
  const std::string axes = R"("policy": ["demand", "deepum:rows=1024,assoc=4"],
                              "capacity": [0.5, "8GiB"], "workload-arg:batch": [1, 2])";
  absl::StatusOr<Grid> grid = ParseGrid(
      "g.json", absl::StrCat(R"({"fixed": {"workload": "mlp"}, "axes": {)", axes, "}}"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  const std::vector<SweepCase> cases = ExpandGrid(*grid);
  std::set<std::string> names;
  const std::regex safe("[A-Za-z0-9.+-]+(_[A-Za-z0-9.+-]+)*-[0-9a-f]{12}");
  for (const SweepCase& c : cases) {
    EXPECT_TRUE(std::regex_match(c.name, safe)) << c.name;
    names.insert(c.name);
  }
  EXPECT_EQ(names.size(), cases.size());
  // The slug holds the axis values in the command line's order, whatever the
  // file's; the hash is FNV-1a of the sorted arguments (computed apart, in
  // Python), pinned so that a change to it, which would orphan every stored
  // result, is seen.
  EXPECT_EQ(cases[0].name, "batch-1_demand_cap0.5-449edda64b6d");
  absl::StatusOr<Grid> reordered = ParseGrid(
      "g.json", R"({"axes": {"workload-arg:batch": [1, 2], "capacity": [0.5, "8GiB"],
                   "policy": ["demand", "deepum:rows=1024,assoc=4"]},
                   "fixed": {"workload": "mlp"}})");
  ASSERT_TRUE(reordered.ok());
  std::set<std::string> reordered_names;
  for (const SweepCase& c : ExpandGrid(*reordered)) reordered_names.insert(c.name);
  EXPECT_EQ(reordered_names, names);
  // A fixed argument is part of every case's identity.
  absl::StatusOr<Grid> other = ParseGrid(
      "g.json",
      absl::StrCat(R"({"fixed": {"workload": "mlp", "device": "h200"}, "axes": {)", axes, "}}"));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(ExpandGrid(*other)[0].name, cases[0].name);
}

TEST_F(SweepTest, AYamlGridGivesTheCasesOfItsJson) {
  const fs::path yaml = dir_ / "grid.yaml";
  Write(yaml, "fixed: {workload: mlp, workload-arg: [\"layers=2\"]}\n"
              "axes:\n  policy: [demand, 'deepum:rows=1024']\n  capacity: [0.25, 8GiB]\n"
              "slurm: {max_running: 3}\n");
  ASSERT_EQ(Sweep(yaml).code, kExitOk);
  const std::string from_yaml = Read(Results() / "jobs");
  EXPECT_THAT(Read(Results() / "slurm" / "array-0.sbatch"), HasSubstr("%3\n"));
  fs::remove_all(Results());
  ASSERT_EQ(Sweep(Grid(R"({"fixed": {"workload": "mlp", "workload-arg": ["layers=2"]},
                           "axes": {"policy": ["demand", "deepum:rows=1024"],
                                    "capacity": [0.25, "8GiB"]},
                           "slurm": {"max_running": 3}})"))
                .code,
            kExitOk);
  EXPECT_EQ(Read(Results() / "jobs"), from_yaml);
  fs::remove_all(Results());
  Write(yaml, "axes: {policy: [demand\n");
  const Outcome bad = Sweep(yaml);
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_TRUE(IsOneLine(bad.err)) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("not valid YAML"));
  EXPECT_FALSE(fs::exists(Results()));
}

TEST(SweepGridTest, ShellQuoteKeepsWordsWhole) {
  EXPECT_EQ(ShellQuote("--policy=deepum:rows=1024,assoc=4"), "--policy=deepum:rows=1024,assoc=4");
  EXPECT_EQ(ShellQuote("/a dir/it's"), "'/a dir/it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST_F(SweepTest, BadInputIsAOneLineUsageErrorAndWritesNothing) {
  const std::string mlp = R"("fixed": {"workload": "mlp"})";
  const std::vector<std::string> bad = {
      "{not json",
      "[1, 2]",
      absl::StrCat("{", mlp, R"(, "axis": {"policy": ["demand"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"polcy": ["demand"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy": []}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy": "demand"}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy": ["demand", "demand"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy": ["demand", "nope"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy": ["deepum:rows=-1"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"capacity": [0.5, "1KiB"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"device": ["tpu"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"backend": ["gpu-of-dreams"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"workload-arg:layers": [0]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"workload": ["mlp"]}})"),
      absl::StrCat("{", mlp, R"(, "axes": {"policy-param": ["rows=2"]}})"),
      R"({"axes": {"policy": ["demand"]}})",
      R"({"fixed": {"workload": "nope"}, "axes": {"policy": ["demand"]}})",
      R"({"fixed": {"workload": "mlp", "trace": "x.umt"}})",
      absl::StrCat("{", mlp, R"(, "slurm": {"max_running": 0}})"),
  };
  for (const std::string& text : bad) {
    const Outcome outcome = Sweep(Grid(text));
    EXPECT_EQ(outcome.code, kExitUsage) << text;
    EXPECT_TRUE(IsOneLine(outcome.err)) << text << " -> " << outcome.err;
    EXPECT_FALSE(fs::exists(Results())) << text;
  }
  const fs::path good = Grid(absl::StrCat("{", mlp, "}"));
  for (const char* run : {"--run=slurm", "--run=local:0", "--run=local:x"}) {
    const Outcome outcome = Sweep(good, {run});
    EXPECT_EQ(outcome.code, kExitUsage) << run;
    EXPECT_TRUE(IsOneLine(outcome.err)) << outcome.err;
    EXPECT_FALSE(fs::exists(Results())) << run;
  }
  EXPECT_EQ(Umlab({"sweep"}).code, kExitUsage);
  EXPECT_EQ(Umlab({"sweep", (dir_ / "absent.json").string()}).code, kExitUsage);
  EXPECT_EQ(Umlab({"merge", (dir_ / "absent").string()}).code, kExitUsage);
}

TEST_F(SweepTest, WritesAJobFileSlurmArraysAndAManifest) {
  const Outcome outcome = Sweep(Grid(TwentyCaseGrid()));
  ASSERT_EQ(outcome.code, kExitOk) << outcome.err;
  EXPECT_THAT(outcome.out, HasSubstr("20 cases (policy 5 x capacity 2 x device 2)"));
  EXPECT_THAT(outcome.out, HasSubstr("0 done, 20 to run"));
  const std::vector<std::string> jobs = Lines(Read(Results() / "jobs"));
  ASSERT_EQ(jobs.size(), 20u);
  for (const std::string& job : jobs) {
    EXPECT_THAT(job, HasSubstr(std::string(kUmlab) + " run --workload=mlp"));
    EXPECT_THAT(job, HasSubstr("--format=json"));
  }
  const Json manifest = Json::parse(Read(Results() / "sweep.json"));
  ASSERT_EQ(manifest["cases"].size(), 20u);
  EXPECT_EQ(manifest["axes"], Json::parse(R"(["policy", "capacity", "device"])"));
  EXPECT_EQ(manifest["cases"][19]["grid"],
            Json::parse(R"({"policy": "ideal", "capacity": "1.0", "device": "h200"})"));
  EXPECT_EQ(manifest["cases"][0]["command"], jobs[0]);
  // One class: a small mlp asks for the least time and memory.
  const std::string script = Read(Results() / "slurm" / "array-0.sbatch");
  EXPECT_THAT(script, HasSubstr("#SBATCH --array=0-19%4\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --time=1\n"));
  EXPECT_THAT(script, HasSubstr("#SBATCH --mem=256M\n"));
  EXPECT_EQ(Lines(Read(Results() / "slurm" / "array-0.jobs")), jobs);
  EXPECT_THAT(Read(Results() / "slurm" / "submit.sh"), HasSubstr("sbatch --parsable array-0.sbatch"));
  EXPECT_FALSE(fs::exists(Results() / "slurm" / "array-1.sbatch"));
}

TEST_F(SweepTest, CasesOfDifferentCostGoToArraysOfDifferentRequests) {
  const Outcome outcome = Sweep(
      Grid(R"({"axes": {"workload": ["mlp", "resnet152"], "policy": ["demand", "ideal"]}})"));
  ASSERT_EQ(outcome.code, kExitOk) << outcome.err;
  const std::string small = Read(Results() / "slurm" / "array-0.sbatch");
  const std::string large = Read(Results() / "slurm" / "array-1.sbatch");
  EXPECT_THAT(small, HasSubstr("--array=0-1%100"));
  EXPECT_THAT(large, HasSubstr("--array=0-1%100"));
  EXPECT_NE(small.substr(small.find("--time")), large.substr(large.find("--time")));
  for (const std::string& line : Lines(Read(Results() / "slurm" / "array-1.jobs"))) {
    EXPECT_THAT(line, HasSubstr("--workload=resnet152"));
  }
}

// A job line run by hand: what any engine does with it.
int RunJobLine(const std::string& line) {
  const int status = std::system(("bash -c " + ShellQuote(line)).c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(SweepTest, AFinishedCaseIsSkippedAndAHalfWrittenOneIsNotTrusted) {
  ASSERT_EQ(Sweep(Grid(absl::StrCat(R"({"fixed": {"workload": "mlp", "workload-arg": [")",
                                     kSmallMlp, R"("]}, "axes": {"policy": ["demand"]}})")))
                .code,
            kExitOk);
  const std::string line = Lines(Read(Results() / "jobs"))[0];
  const std::string name = Json::parse(Read(Results() / "sweep.json"))["cases"][0]["name"];
  const fs::path result = Results() / "cases" / (name + ".json");
  // A run that died mid-write leaves only its .part file: not a result.
  Write(Results() / "cases" / (name + ".json.part.1"), "{\"runs\":[");
  EXPECT_EQ(Umlab({"merge", Results().string()}).code, kExitFailure);
  const Json missing = Json::parse(Read(Results() / "merged.json"))["missing"];
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]["case"], name);
  EXPECT_THAT(missing[0]["reason"].get<std::string>(), HasSubstr("started, not finished"));

  ASSERT_EQ(RunJobLine(line), 0);
  ASSERT_TRUE(fs::exists(result));
  EXPECT_FALSE(fs::exists(Results() / "cases" / (name + ".err")));
  // The result is exactly what `umlab run` prints for those arguments.
  const Outcome direct = Umlab({"run", "--workload=mlp", std::string("--workload-arg=") + kSmallMlp,
                                "--policy=demand", "--format=json"});
  ASSERT_EQ(direct.code, kExitOk);
  EXPECT_EQ(Read(result), direct.out);

  // Rerunning does no work: the file is not rewritten.
  const fs::file_time_type written = fs::last_write_time(result);
  fs::last_write_time(result, written - std::chrono::hours(1));
  ASSERT_EQ(RunJobLine(line), 0);
  EXPECT_EQ(fs::last_write_time(result), written - std::chrono::hours(1));
  const Outcome again = Sweep(Results().parent_path() / "grid.json");
  EXPECT_THAT(again.out, HasSubstr("1 done, 0 to run"));
}

TEST_F(SweepTest, AFailingCaseIsMergedWithTheRestAndNamed) {
  // Two recorded traces; one is damaged after the sweep checked it, so its
  // run fails while the other's succeeds.
  for (const char* name : {"good", "bad"}) {
    const Outcome record =
        Umlab({"record", "--output=" + (dir_ / (std::string(name) + ".umt")).string(),
               "--workload=mlp", std::string("--workload-arg=") + kSmallMlp});
    ASSERT_EQ(record.code, kExitOk) << record.err;
  }
  ASSERT_EQ(Sweep(Grid(R"({"axes": {"trace": ["good.umt", "bad.umt"],
                                   "policy": ["demand", "deepum"]}})"))
                .code,
            kExitOk);
  const fs::path bad = dir_ / "bad.umt";
  fs::resize_file(bad, fs::file_size(bad) / 2);
  for (const std::string& line : Lines(Read(Results() / "jobs"))) {
    EXPECT_EQ(RunJobLine(line), line.find("bad.umt") == std::string::npos ? 0 : 1) << line;
  }
  const Outcome merge = Umlab({"merge", Results().string()});
  EXPECT_EQ(merge.code, kExitFailure);
  EXPECT_TRUE(IsOneLine(merge.err)) << merge.err;
  EXPECT_THAT(merge.err, HasSubstr("2 case(s) failed and 0 missing"));
  EXPECT_THAT(merge.out, HasSubstr("merged 2 of 4 cases"));
  const Json merged = Json::parse(Read(Results() / "merged.json"));
  ASSERT_EQ(merged["runs"].size(), 2u);
  ASSERT_EQ(merged["failed"].size(), 2u);
  EXPECT_EQ(merged["missing"].size(), 0u);
  for (const Json& run : merged["runs"]) {
    EXPECT_EQ(run["grid"]["trace"], (dir_ / "good.umt").lexically_normal().string());
    EXPECT_GT(run["faults"].get<uint64_t>(), 0u);
  }
  for (const Json& failed : merged["failed"]) {
    EXPECT_EQ(failed["grid"]["trace"], (dir_ / "bad.umt").lexically_normal().string());
    EXPECT_THAT(failed["case"].get<std::string>(), HasSubstr("bad_"));
    EXPECT_THAT(merge.out, HasSubstr("failed: " + failed["case"].get<std::string>()));
    EXPECT_FALSE(failed["error"].get<std::string>().empty());
  }
  const std::vector<std::string> csv = Lines(Read(Results() / "merged.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_THAT(csv[0], HasSubstr("\"case\",\"status\",\"grid.trace\",\"grid.policy\",\"policy\""));
  EXPECT_THAT(csv[3], HasSubstr("\"failed\""));
}

TEST_F(SweepTest, RunsLocallyThroughGnuParallelResumesAndMerges) {
  if (std::system("parallel --version 2>/dev/null | grep -q 'GNU parallel'") != 0) {
    GTEST_SKIP() << "GNU parallel is not installed (Debian package parallel)";
  }
  const fs::path grid = Grid(TwentyCaseGrid());
  const Outcome first = Sweep(grid, {"--run=local:2"});
  ASSERT_EQ(first.code, kExitOk) << first.err;
  EXPECT_THAT(first.out, HasSubstr("ran 20 cases: 20 of 20 done"));
  const Outcome merge = Umlab({"merge", Results().string()});
  ASSERT_EQ(merge.code, kExitOk) << merge.err;
  const std::string merged = Read(Results() / "merged.json");
  const Json json = Json::parse(merged);
  ASSERT_EQ(json["runs"].size(), 20u);
  // Grid order: policy slowest, device fastest.
  EXPECT_EQ(json["runs"][7]["grid"],
            Json::parse(R"({"policy": "uvm-default", "capacity": "1.0", "device": "h200"})"));
  EXPECT_EQ(json["runs"][7]["policy"], "uvm-default");
  EXPECT_EQ(json["runs"][7]["device"], "h200");
  EXPECT_EQ(Lines(Read(Results() / "merged.csv")).size(), 21u);

  // A rerun finds everything done and runs nothing; the merge is the same.
  const Outcome second = Sweep(grid, {"--run=local:2"});
  ASSERT_EQ(second.code, kExitOk) << second.err;
  EXPECT_THAT(second.out, HasSubstr("20 done, 0 to run"));
  EXPECT_THAT(second.out, HasSubstr("ran 0 cases"));
  ASSERT_EQ(Umlab({"merge", Results().string()}).code, kExitOk);
  EXPECT_EQ(Read(Results() / "merged.json"), merged);
}

}  // namespace
}  // namespace umlab::cli
