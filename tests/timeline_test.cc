// `--timeline` and `umlab timeline`: the output obeys the trace-event
// format's rules (what Perfetto and chrome://tracing require) and its
// numbers add up to the run's totals.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/json_text.h"
#include "cli/timeline_json.h"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;

using umlab::testing::Outcome;
using umlab::testing::Umlab;

Json ReadJson(const std::string& path) {
  return Json::parse(umlab::testing::ReadText(path), nullptr, /*allow_exceptions=*/false);
}

int Tid(TimelineTrack track) { return static_cast<int>(track); }

// The trace-event format's rules, as Chrome's and Perfetto's importers
// apply them. Returns the first broken rule, or "" if there is none.
std::string CheckTraceEventFormat(const Json& doc) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return "no traceEvents list";
  }
  struct Open {
    std::string name;
    double ts;
  };
  std::map<std::pair<int, int>, std::vector<Open>> stacks;       // B/E per track
  // X per track, in whole nanoseconds: the file's microseconds are
  // decimals, and ts + dur may round a hair past the next slice's ts.
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> slices;
  for (const Json& e : doc["traceEvents"]) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string() || !e.contains("name") ||
        !e["name"].is_string() || !e.contains("pid")) {
      return "an event lacks ph, name or pid: " + JsonText(e);
    }
    const std::string ph = e["ph"].get<std::string>();
    if (ph == "M") continue;
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0 ||
        !e.contains("tid")) {
      return "an event lacks a non-negative ts or a tid: " + JsonText(e);
    }
    const auto track = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
    const double ts = e["ts"].get<double>();
    const std::string name = e["name"].get<std::string>();
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        return "an X event without a non-negative dur: " + JsonText(e);
      }
      const int64_t begin = std::llround(ts * 1000);
      slices[track].emplace_back(begin, begin + std::llround(e["dur"].get<double>() * 1000));
    } else if (ph == "B") {
      stacks[track].push_back(Open{name, ts});
    } else if (ph == "E") {
      std::vector<Open>& stack = stacks[track];
      if (stack.empty() || stack.back().name != name || stack.back().ts > ts) {
        return "an E event closes no matching B: " + JsonText(e);
      }
      stack.pop_back();
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        return "a counter without args: " + JsonText(e);
      }
      for (const auto& [key, value] : e["args"].items()) {
        if (!value.is_number()) return "a counter value that is not a number: " + JsonText(e);
      }
    } else if (ph == "i") {
      if (!e.contains("s") || e["s"] != "t") return "an instant without thread scope";
    } else {
      return "an unexpected phase " + ph;
    }
  }
  for (const auto& [track, stack] : stacks) {
    if (!stack.empty()) return "a B event never closed: " + stack.back().name;
  }
  // Slices on one track nest or follow each other; they never overlap
  // partly (a viewer would draw them wrongly).
  for (auto& [track, list] : slices) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<int64_t> ends;
    for (const auto& [begin, end] : list) {
      while (!ends.empty() && ends.back() <= begin) ends.pop_back();
      if (!ends.empty() && end > ends.back()) {
        return "X slices overlap on track " + std::to_string(track.second);
      }
      ends.push_back(end);
    }
  }
  return "";
}

struct Totals {
  uint64_t h2d_bytes = 0, d2h_bytes = 0, kernels = 0, iterations = 0, batches = 0, faults = 0;
  uint64_t counters = 0;
};

Totals Sum(const Json& doc) {
  Totals t;
  for (const Json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"].get<std::string>();
    if (ph == "M") continue;
    const int tid = e["tid"].get<int>();
    if (ph == "C") ++t.counters;
    if (ph == "B" && tid == Tid(TimelineTrack::kCompute)) ++t.iterations;
    if (ph == "X" && tid == Tid(TimelineTrack::kCompute)) ++t.kernels;
    if (ph == "X" && tid == Tid(TimelineTrack::kFaultService)) {
      ++t.batches;
      t.faults += e["args"]["faults"].get<uint64_t>();
    }
    if (ph != "C" && tid == Tid(TimelineTrack::kHostToDevice)) {
      t.h2d_bytes += e["args"]["bytes"].get<uint64_t>();
    }
    if (ph != "C" && tid == Tid(TimelineTrack::kDeviceToHost)) {
      t.d2h_bytes += e["args"]["bytes"].get<uint64_t>();
    }
  }
  return t;
}

// GPT-2 small's whole graph, cut down to one short iteration so the test
// stays quick under the sanitizers (a full gpt2-small run's timeline is
// checked the same way in docs/report.md).
const std::vector<std::string> kGpt2Tiny = {
    "--workload=gpt2-small", "--workload-arg", "batch=1,seq=32,iterations=1,precision=fp16"};

TEST(TimelineTest, TheFormatCheckCatchesBrokenFiles) {
  EXPECT_THAT(CheckTraceEventFormat(Json::parse(R"({"traceEvents":[
      {"name":"a","ph":"B","ts":1,"pid":1,"tid":1},{"name":"b","ph":"E","ts":2,"pid":1,"tid":1}]})")),
              HasSubstr("matching B"));
  EXPECT_THAT(CheckTraceEventFormat(Json::parse(R"({"traceEvents":[
      {"name":"a","ph":"X","ts":1,"dur":-1,"pid":1,"tid":1}]})")),
              HasSubstr("dur"));
  EXPECT_THAT(CheckTraceEventFormat(Json::parse(R"({"traceEvents":[
      {"name":"a","ph":"X","ts":1,"dur":5,"pid":1,"tid":1},
      {"name":"b","ph":"X","ts":3,"dur":5,"pid":1,"tid":1}]})")),
              HasSubstr("overlap"));
  EXPECT_THAT(CheckTraceEventFormat(Json::parse(R"({"traceEvents":[
      {"name":"c","ph":"C","ts":1,"pid":1,"tid":1}]})")),
              HasSubstr("counter"));
  EXPECT_EQ(CheckTraceEventFormat(Json::parse(R"({"traceEvents":[
      {"name":"a","ph":"B","ts":1,"pid":1,"tid":1},
      {"name":"k","ph":"X","ts":1,"dur":1,"pid":1,"tid":1},
      {"name":"a","ph":"E","ts":3,"pid":1,"tid":1}]})")),
            "");
}

// Runs under two policies on the small mlp (several iterations, evictions
// and prefetches) and one on GPT-2: valid files whose kernels, iterations,
// batches, faults and bytes are the run's.
TEST(TimelineTest, ARunsTimelineIsValidAndAddsUpToItsTotals) {
  struct Case {
    std::vector<std::string> program;
    std::string policy;
  };
  const std::vector<Case> cases = {{umlab::testing::kSmallMlp, "demand"},
                                   {umlab::testing::kSmallMlp, "deepum"},
                                   {kGpt2Tiny, "deepum"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.program[0] + " " + c.policy);
    const std::string path = umlab::testing::PrivateTempPath("timeline_" + c.policy + ".json");
    std::vector<std::string> args = {"run", "--policy=" + c.policy, "--capacity=0.5",
                                     "--format=json", "--timeline=" + path};
    args.insert(args.end(), c.program.begin(), c.program.end());
    const Outcome run = Umlab(args);
    ASSERT_EQ(run.code, kExitOk) << run.err;
    const Json result = Json::parse(run.out)["runs"][0];
    const Json doc = ReadJson(path);
    ASSERT_FALSE(doc.is_discarded()) << "not JSON";
    EXPECT_EQ(CheckTraceEventFormat(doc), "");
    const Totals totals = Sum(doc);
    EXPECT_EQ(totals.h2d_bytes, result["h2d_bytes"].get<uint64_t>());
    EXPECT_EQ(totals.d2h_bytes, result["d2h_bytes"].get<uint64_t>());
    EXPECT_EQ(totals.kernels, result["kernels"].get<uint64_t>());
    EXPECT_EQ(totals.iterations, result["iterations"].get<uint64_t>());
    EXPECT_EQ(totals.batches, result["fault_batches"].get<uint64_t>());
    EXPECT_EQ(totals.faults, result["faults"].get<uint64_t>());
    EXPECT_GT(totals.h2d_bytes, 0u);
    EXPECT_GT(totals.counters, 0u);
    EXPECT_EQ(doc["otherData"]["policy"], c.policy);
  }
}

// From a trace: the events it stamps, valid, with the trace's bytes; the
// tracks it cannot fill are named in the notes.
TEST(TimelineTest, ATracesTimelineHoldsWhatTheTraceRecorded) {
  const std::string trace = umlab::testing::PrivateTempPath("timeline.umt");
  const std::string path = umlab::testing::PrivateTempPath("from_trace.json");
  const Outcome record = Umlab(umlab::testing::WithSmallMlp(
      {"record", "--policy=deepum", "--format=json", "--output=" + trace}));
  ASSERT_EQ(record.code, kExitOk) << record.err;
  const Json result = Json::parse(record.out)["runs"][0];
  const Outcome timeline = Umlab({"timeline", trace, "--output=" + path});
  ASSERT_EQ(timeline.code, kExitOk) << timeline.err;
  const Json doc = ReadJson(path);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(CheckTraceEventFormat(doc), "");
  const Totals totals = Sum(doc);
  EXPECT_EQ(totals.h2d_bytes, result["h2d_bytes"].get<uint64_t>());
  EXPECT_EQ(totals.kernels, 0u);  // not timed in a trace
  EXPECT_THAT(JsonText(doc["otherData"]["notes"]), HasSubstr("--timeline"));
  EXPECT_EQ(doc["otherData"]["policy"], "deepum");
}

TEST(TimelineTest, BadInputIsAOneLineError) {
  const std::string path = umlab::testing::PrivateTempPath("never.json");
  const std::string not_a_trace = umlab::testing::PrivateTempPath("not_a_trace.umt");
  std::ofstream(not_a_trace) << "hello";
  for (const std::string& input : {not_a_trace, umlab::testing::PrivateTempPath("missing.umt")}) {
    const Outcome outcome = Umlab({"timeline", input, "--output=" + path});
    EXPECT_EQ(outcome.code, kExitFailure);
    EXPECT_EQ(std::count(outcome.err.begin(), outcome.err.end(), '\n'), 1) << outcome.err;
  }
  EXPECT_EQ(Umlab({"timeline", not_a_trace}).code, kExitUsage);
  EXPECT_EQ(Umlab({"timeline", not_a_trace, not_a_trace, "--output=" + path}).code, kExitUsage);
  EXPECT_FALSE(std::ifstream(path).good());
}

}  // namespace
}  // namespace umlab::cli
