// `umlab report` and `compare --report`: the page holds every picture, is
// self-contained, is drawn from the JSON contract's `series` (whose sums
// agree with the run's totals), and bad input is a one-line error.
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/html_report.h"
#include "cli/json_text.h"
#include "cli/runner/experiment.h"
#include "core/run_series.h"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using umlab::testing::IsOneLine;
using umlab::testing::Outcome;
using umlab::testing::Umlab;
using umlab::testing::WithSmallMlp;

std::string Read(const std::string& path) { return umlab::testing::ReadText(path); }

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(ReportTest, CompareWritesASelfContainedPageWithEveryPlot) {
  const std::string page = umlab::testing::PrivateTempPath("report.html");
  const Outcome compare =
      Umlab(WithSmallMlp({"compare", "--policies=demand,deepum,ideal", "--report=" + page}));
  ASSERT_EQ(compare.code, kExitOk) << compare.err;
  const std::string html = Read(page);
  ASSERT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("</html>"));
  for (const std::string& plot : ReportPlotNames()) {
    EXPECT_THAT(html, HasSubstr("data-plot=\"" + plot + "\"")) << plot;
  }
  // The pictures over time come once per policy.
  for (const char* plot : {"kernel-faults", "residency", "link"}) {
    EXPECT_EQ(Count(html, std::string("data-plot=\"") + plot + "\""), 3u) << plot;
  }
  EXPECT_THAT(html, Not(HasSubstr("class=\"missing\"")));
  // Nothing is fetched: no script, no stylesheet or image from anywhere.
  EXPECT_FALSE(std::regex_search(html, std::regex("(src|href)\\s*=\\s*\"?(https?:)?//",
                                                  std::regex::icase)));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  // Kernel names are on hover: a faulting mlp kernel's name in a <title>.
  EXPECT_TRUE(std::regex_search(html, std::regex("<title>demand: kernel [0-9]+ [^<]+: [0-9]+ faults")));
  // Every policy in the comparison table, the baseline at 1.00x.
  for (const char* policy : {"demand", "deepum", "ideal"}) EXPECT_THAT(html, HasSubstr(policy));
  EXPECT_THAT(html, HasSubstr("<td>1.00x</td>"));
}

TEST(ReportTest, ReportReadsTheJsonThatCompareAndRunPrint) {
  const std::string json = umlab::testing::PrivateTempPath("runs.json");
  const std::string single = umlab::testing::PrivateTempPath("single.json");
  const std::string page = umlab::testing::PrivateTempPath("from_json.html");
  const Outcome compare =
      Umlab(WithSmallMlp({"compare", "--policies=demand,deepum", "--format=json", "--series"}));
  ASSERT_EQ(compare.code, kExitOk) << compare.err;
  Write(json, compare.out);
  const Outcome run = Umlab(WithSmallMlp({"run", "--policy=uvm-default", "--format=json", "--series"}));
  ASSERT_EQ(run.code, kExitOk) << run.err;
  Write(single, run.out);
  const Outcome report = Umlab({"report", json, single, "--output=" + page});
  ASSERT_EQ(report.code, kExitOk) << report.err;
  const std::string html = Read(page);
  // Same workload, device and capacity: one group of three policies.
  EXPECT_EQ(Count(html, "<section class=\"group\">"), 1u);
  EXPECT_EQ(Count(html, "data-plot=\"residency\""), 3u);
  EXPECT_THAT(html, HasSubstr("uvm-default"));
}

// --trace adds a section per trace, drawn from what the trace stamped.
TEST(ReportTest, ATraceAddsItsFaultsAndTrafficOverTime) {
  const std::string trace = umlab::testing::PrivateTempPath("report.umt");
  const std::string json = umlab::testing::PrivateTempPath("recorded.json");
  const std::string page = umlab::testing::PrivateTempPath("with_trace.html");
  const Outcome record = Umlab(
      WithSmallMlp({"record", "--policy=deepum", "--format=json", "--output=" + trace}));
  ASSERT_EQ(record.code, kExitOk) << record.err;
  Write(json, record.out);
  ASSERT_EQ(Umlab({"report", json, "--trace=" + trace, "--output=" + page}).code, kExitOk);
  const std::string html = Read(page);
  EXPECT_THAT(html, HasSubstr("data-plot=\"trace-faults\""));
  EXPECT_THAT(html, HasSubstr("data-plot=\"trace-link\""));
  EXPECT_THAT(html, HasSubstr("policy deepum"));
  const Outcome damaged = Umlab({"report", json, "--trace=" + json, "--output=" + page});
  EXPECT_EQ(damaged.code, kExitFailure);
  EXPECT_TRUE(IsOneLine(damaged.err)) << damaged.err;
  EXPECT_THAT(damaged.err, HasSubstr("not a umlab trace"));
}

TEST(ReportTest, WithoutSeriesThePageSaysWhatIsMissing) {
  const std::string json = umlab::testing::PrivateTempPath("plain.json");
  const std::string page = umlab::testing::PrivateTempPath("plain.html");
  const Outcome compare = Umlab(WithSmallMlp({"compare", "--policies=demand,deepum", "--format=json"}));
  ASSERT_EQ(compare.code, kExitOk);
  EXPECT_THAT(compare.out, Not(HasSubstr("\"series\"")));
  Write(json, compare.out);
  ASSERT_EQ(Umlab({"report", json, "--output=" + page}).code, kExitOk);
  const std::string html = Read(page);
  for (const char* plot : {"comparison", "iterations", "prefetch", "lateness"}) {
    EXPECT_THAT(html, HasSubstr(std::string("data-plot=\"") + plot + "\""));
  }
  EXPECT_THAT(html, Not(HasSubstr("data-plot=\"residency\"")));
  EXPECT_THAT(html, HasSubstr("--series"));
}

TEST(ReportTest, BadInputIsAOneLineErrorAndNoPage) {
  const std::string page = umlab::testing::PrivateTempPath("never.html");
  const std::string dir = umlab::testing::PrivateTempPath("");
  struct Case {
    std::string name, text, expect;
  };
  const std::vector<Case> cases = {
      {"garbage.json", "{\"runs\": [", "not valid JSON"},
      {"noruns.json", "{\"other\": 1}", "no \"runs\" list"},
      {"empty.json", "{\"runs\": []}", "empty"},
      {"partial.json", "{\"runs\": [{\"policy\": \"demand\"}]}", "has no string \"backend\""},
      {"newer.json", "{\"contract_version\": \"2.0\", \"runs\": []}",
       "newer than this umlab reads"},
      {"newer_minor.json", "{\"contract_version\": \"3.1\", \"runs\": []}",
       "newer than this umlab reads"},
  };
  for (const Case& c : cases) {
    const std::string path = dir + c.name;
    Write(path, c.text);
    const Outcome report = Umlab({"report", path, "--output=" + page});
    EXPECT_EQ(report.code, kExitFailure) << c.name;
    EXPECT_TRUE(IsOneLine(report.err)) << report.err;
    EXPECT_THAT(report.err, HasSubstr(c.expect)) << c.name;
  }
  const Outcome missing = Umlab({"report", dir + "no_such.json", "--output=" + page});
  EXPECT_EQ(missing.code, kExitFailure);
  EXPECT_THAT(missing.err, HasSubstr("cannot open"));
  EXPECT_EQ(Umlab({"report", dir + "garbage.json"}).code, kExitUsage);  // no --output
  EXPECT_EQ(Umlab({"report", "--output=" + page}).code, kExitUsage);    // no input
  EXPECT_FALSE(std::ifstream(page).good());
}

// The series agree with the run: bytes that landed add up to the run's
// traffic less what was still on its way at the end, faults add up
// exactly, the last iteration's kernels are the program's, and memory stays
// within the capacity.
TEST(ReportTest, SeriesAddUpToTheRunsTotals) {
  // The program's last iteration, counted from its events.
  absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload(
      "mlp", {"layers=2,hidden=512,batch=256,iterations=3"}, DevicePreset("v100-pcie3")->compute);
  ASSERT_TRUE(program.ok());
  std::unique_ptr<EventSource> events = *program->Open();
  uint64_t last_iteration_kernels = 0;
  for (Event event; events->Next(event);) {
    if (event.kind == EventKind::kIterationBegin) last_iteration_kernels = 0;
    if (event.kind == EventKind::kKernelBegin) ++last_iteration_kernels;
  }
  ASSERT_GT(last_iteration_kernels, 0u);
  // --check-invariants also checks the page totals the series are sampled from.
  const Outcome compare = Umlab(WithSmallMlp({"compare", "--policies=demand,deepum",
                                              "--format=json", "--series", "--check-invariants"}));
  ASSERT_EQ(compare.code, kExitOk);
  const Json runs = Json::parse(compare.out)["runs"];
  ASSERT_EQ(runs.size(), 2u);
  for (const Json& run : runs) {
    SCOPED_TRACE(run["policy"].get<std::string>());
    const Json& s = run["series"];
    auto sum = [&](const char* key) {
      uint64_t total = 0;
      for (const Json& v : s[key]) total += v.get<uint64_t>();
      return total;
    };
    EXPECT_LE(s["resident_bytes"].size(), kSeriesIntervals);
    EXPECT_GT(s["resident_bytes"].size(), kSeriesIntervals / 4);
    EXPECT_EQ(sum("faults"), run["faults"].get<uint64_t>());
    const uint64_t landed = sum("fault_h2d_bytes") + sum("prefetch_h2d_bytes");
    EXPECT_LE(landed, run["h2d_bytes"].get<uint64_t>());
    // At most the prefetches in flight (4 blocks) are still on their way.
    EXPECT_GE(landed + 4 * kBlockSize, run["h2d_bytes"].get<uint64_t>());
    EXPECT_LE(sum("eviction_d2h_bytes"), run["d2h_bytes"].get<uint64_t>());
    EXPECT_EQ(s["kernels"].size(), last_iteration_kernels);
    uint64_t kernel_faults = 0;
    for (const Json& k : s["kernels"]) kernel_faults += k["faults"].get<uint64_t>();
    EXPECT_EQ(kernel_faults, run["per_iteration"].back()["faults"].get<uint64_t>());
    for (size_t i = 0; i < s["resident_bytes"].size(); ++i) {
      const uint64_t held = s["resident_bytes"][i].get<uint64_t>() +
                            s["in_flight_bytes"][i].get<uint64_t>() +
                            s["prefetched_unused_bytes"][i].get<uint64_t>() +
                            s["inactive_bytes"][i].get<uint64_t>();
      EXPECT_LE(held, run["capacity_bytes"].get<uint64_t>()) << "interval " << i;
    }
  }
  EXPECT_EQ(runs[0]["series"]["prefetch_h2d_bytes"], Json(std::vector<uint64_t>(
      runs[0]["series"]["prefetch_h2d_bytes"].size(), 0)));  // demand does not prefetch
}

// However long the run, the recorder keeps at most its number of
// intervals: pairs merge, sums add, gauges keep the earlier state.
TEST(ReportTest, SeriesRecorderWidensItsIntervals) {
  RunSeriesRecorder recorder(/*expected_ns=*/1000, /*max_intervals=*/10);
  EXPECT_EQ(recorder.series().interval_ns, 100);
  Transfer transfer;
  transfer.kind = TransferKind::kEviction;
  transfer.copy.set(0);
  for (Nanos t = 0; t < 5000; t += 50) recorder.OnTransferCompleted(transfer, t);
  const RunSeries& series = recorder.series();
  EXPECT_EQ(series.interval_ns, 800);  // 100 -> 200 -> 400 -> 800: 5000 / 800 < 10
  EXPECT_LE(series.eviction_d2h_bytes.size(), 10u);
  uint64_t total = 0;
  for (uint64_t bytes : series.eviction_d2h_bytes) total += bytes;
  EXPECT_EQ(total, 100 * kPageSize);
  EXPECT_EQ(series.eviction_d2h_bytes.front(), 16 * kPageSize);  // 0..799 ns: 16 transfers
}

}  // namespace
}  // namespace umlab::cli
