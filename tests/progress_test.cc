// The progress line (cli/runner/progress.h): what it says, when it is drawn
// and cleared, and that it stays silent when stderr is not a terminal or
// --quiet is given. The clock is a counter the test moves, so nothing here
// depends on how fast the machine is.
#include "cli/runner/progress.h"

#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/runner/experiment.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A clock the test sets by hand.
struct FakeClock {
  absl::Time now = absl::UnixEpoch();
  int reads = 0;
  ProgressOptions Options() {
    ProgressOptions options;
    options.enabled = true;
    options.now = [this] {
      ++reads;
      return now;
    };
    return options;
  }
};

TEST(ProgressTest, DurationsReadAsSecondsMinutesAndHours) {
  EXPECT_EQ(FormatProgressDuration(absl::Milliseconds(4900)), "4 s");
  EXPECT_EQ(FormatProgressDuration(absl::Seconds(125)), "2 min 05 s");
  EXPECT_EQ(FormatProgressDuration(absl::Seconds(3720)), "1 h 02 min");
  EXPECT_EQ(FormatProgressDuration(absl::Seconds(-3)), "0 s");
}

TEST(ProgressTest, TheLineSaysRunsElapsedTimeLeftAndIteration) {
  ProgressSnapshot s{.runs = 6, .runs_done = 2, .running = "deepum on mlp", .iteration = 3,
                     .iterations = 4, .also_running = 1, .elapsed = absl::Seconds(4),
                     .fraction_done = 0.5};
  EXPECT_EQ(FormatProgressLine(s),
            "umlab: 2/6 runs done, 4 s elapsed, about 4 s left, iteration 3/4 (+1 running): "
            "deepum on mlp");
  s.also_running = 0;
  s.iteration = 0;
  s.fraction_done = 0;
  EXPECT_EQ(FormatProgressLine(s),
            "umlab: 2/6 runs done, 4 s elapsed, estimating the time left, starting: "
            "deepum on mlp");
  s.running.clear();
  s.runs_done = 6;
  s.fraction_done = 1;
  EXPECT_EQ(FormatProgressLine(s), "umlab: 6/6 runs done, 4 s elapsed, about 0 s left");
}

TEST(ProgressTest, AWideLineIsCutToFitTheTerminal) {
  EXPECT_EQ(FitProgressLine("short", 79), "short");
  EXPECT_EQ(FitProgressLine("0123456789", 10), "0123456789");
  EXPECT_EQ(FitProgressLine("0123456789ab", 10), "0123456...");
  EXPECT_EQ(FitProgressLine("0123456789", 2), "..");
  const ProgressSnapshot s{.runs = 12, .runs_done = 3,
                           .running = "deepum:rows=1024,assoc=4,succs=8 on gpt2-medium",
                           .iteration = 2, .iterations = 4, .also_running = 1,
                           .elapsed = absl::Seconds(75), .fraction_done = 0.25};
  const std::string line = FitProgressLine(FormatProgressLine(s), 79);
  EXPECT_EQ(line.size(), 79u);
  EXPECT_EQ(line,
            "umlab: 3/12 runs done, 1 min 15 s elapsed, about 3 min 45 s left, iteration ...");
}

TEST(ProgressTest, DisabledItWritesNothingAndNeverReadsTheClock) {
  FakeClock clock;
  ProgressOptions options = clock.Options();
  options.enabled = false;
  std::ostringstream err;
  {
    ProgressLine line(err, options);
    const size_t run = line.AddRun("demand on mlp", 100, 2);
    clock.now += absl::Seconds(60);
    line.Update(run, 50, 1);
    line.RunDone(run);
  }
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(clock.reads, 0);
}

TEST(ProgressTest, DrawnAfterTheDelayRedrawnInPlaceAndClearedAtTheEnd) {
  FakeClock clock;
  std::ostringstream err;
  ProgressLine line(err, clock.Options());
  const size_t a = line.AddRun("demand on mlp", 100, 4);
  const size_t b = line.AddRun("deepum on mlp", 100, 4);

  clock.now += absl::Milliseconds(1999);
  line.Update(a, 40, 2);
  EXPECT_EQ(err.str(), "") << "nothing before two seconds";

  clock.now += absl::Milliseconds(1);
  line.Update(a, 50, 2);
  const std::string first =
      "\rumlab: 0/2 runs done, 2 s elapsed, about 6 s left, iteration 2/4: demand on mlp";
  EXPECT_EQ(err.str(), first);

  clock.now += absl::Milliseconds(100);
  line.Update(a, 60, 3);
  EXPECT_EQ(err.str(), first) << "no redraw within the interval";

  clock.now += absl::Milliseconds(900);
  line.RunDone(a);
  line.Update(b, 0, 0);  // within the interval of the line RunDone drew
  const std::string second = "\rumlab: 1/2 runs done, 3 s elapsed, about 3 s left";
  // The second line is shorter than the first: blanks cover the rest.
  EXPECT_EQ(err.str(), first + second + std::string(first.size() - 1 - (second.size() - 1), ' '));

  line.Finish();
  const std::string cleared = "\r" + std::string(first.size() - 1, ' ') + "\r";
  EXPECT_EQ(err.str(), first + second + std::string(first.size() - second.size(), ' ') + cleared);
  clock.now += absl::Seconds(10);
  line.Update(b, 90, 4);
  line.Finish();
  EXPECT_THAT(err.str(), ::testing::EndsWith(cleared)) << "nothing after Finish";
}

TEST(ProgressTest, NothingToClearWhenNothingWasDrawn) {
  FakeClock clock;
  std::ostringstream err;
  ProgressLine line(err, clock.Options());
  line.RunDone(line.AddRun("demand on mlp", 10, 1));
  line.Finish();
  EXPECT_EQ(err.str(), "");
}

// Every run of ExecuteRuns is declared and reported done, in parallel too.
TEST(ProgressTest, ExecuteRunsReportsEveryRun) {
  absl::StatusOr<DeviceConfig> device = DevicePreset("v100-pcie3");
  ASSERT_TRUE(device.ok());
  absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload(
      "mlp", {"layers=2,hidden=256,batch=64,iterations=2"}, device->compute);
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<RunRequest> requests;
  for (const char* policy : {"demand", "deepum", "ideal"}) {
    RunRequest& request = requests.emplace_back();
    request.program = &*program;
    request.device = *device;
    request.policy = policy;
  }
  // Each read of the clock moves it a second on: past the delay by the
  // third read, and every later read is past the interval.
  FakeClock clock;
  ProgressOptions options = clock.Options();
  options.now = [&clock] {
    ++clock.reads;
    clock.now += absl::Seconds(1);
    return clock.now;
  };
  std::ostringstream err;
  ProgressLine line(err, options);
  for (const absl::StatusOr<RunResult>& result : ExecuteRuns(requests, /*jobs=*/2, &line)) {
    EXPECT_TRUE(result.ok()) << result.status();
  }
  EXPECT_THAT(err.str(), StartsWith("\rumlab: "));
  EXPECT_THAT(err.str(), HasSubstr("umlab: 3/3 runs done,"));
  line.Finish();
  EXPECT_EQ(err.str().back(), '\r');
}

struct Outcome {
  int code;
  std::string out, err;
};

Outcome Umlab(const std::vector<std::string>& args, int err_columns) {
  std::ostringstream out, err;
  const int code = Main(args, out, err, err_columns);
  return {code, out.str(), err.str()};
}

const std::vector<std::string> kCompare = {
    "compare", "--workload=mlp", "--workload-arg", "layers=2,hidden=256,batch=64,iterations=2",
    "--policies=demand,deepum", "--format=json"};

TEST(ProgressTest, StderrThatIsNotATerminalStaysSilent) {
  const Outcome outcome = Umlab(kCompare, /*err_columns=*/0);
  EXPECT_EQ(outcome.code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.err, "");
  EXPECT_THAT(outcome.out, StartsWith("{\"contract_version\""));
}

TEST(ProgressTest, QuietSilencesItOnATerminal) {
  std::vector<std::string> args = kCompare;
  args.push_back("--quiet");
  const Outcome outcome = Umlab(args, /*err_columns=*/80);
  EXPECT_EQ(outcome.code, kExitOk) << outcome.err;
  EXPECT_EQ(outcome.err, "");
  for (const char* command : {"run", "compare", "replay", "record", "regress"}) {
    EXPECT_THAT(Umlab({command, "--help"}, 0).out, HasSubstr("--quiet")) << command;
  }
}

}  // namespace
}  // namespace umlab::cli
