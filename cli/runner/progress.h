// The progress line of a long `compare`, `run` or `regress`: on stderr, only
// when stderr is a terminal (and not --quiet), only once the runs have taken
// about two seconds, redrawn in place with '\r' a few times a second and
// cleared when they end, so nothing of it is left between the lines of a
// report and nothing of it ever reaches stdout. It reads:
//
//   umlab: 2/6 runs done, 4 s elapsed, about 3 s left, iteration 3/4 (+1 running): deepum on mlp
//
// (runs done, time, and the iteration of the earliest run still going, with
// its label last), cut to fit the terminal: a line that wrapped could not be
// redrawn in place.
//
// The time left is the elapsed time scaled by the events still to run over
// those already run, across every run. The clock and the terminal decision
// are injected, so tests check what is drawn and when without waiting.
#ifndef UMLAB_CLI_RUNNER_PROGRESS_H_
#define UMLAB_CLI_RUNNER_PROGRESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace umlab::cli {

struct ProgressOptions {
  // Whether anything is ever drawn: stderr is a terminal and --quiet was not
  // given. When false, nothing is written and the clock is never read.
  bool enabled = false;
  absl::Duration delay = absl::Seconds(2);             // nothing before this
  absl::Duration interval = absl::Milliseconds(250);  // between redraws
  size_t width = 79;  // columns the line may take: the terminal's, less one
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

// What one line shows.
struct ProgressSnapshot {
  size_t runs = 0;
  size_t runs_done = 0;
  std::string running;      // the label of the earliest run still going; "" if none
  uint64_t iteration = 0;   // its iteration, from 1; 0 before its first
  uint64_t iterations = 0;  // in its program
  size_t also_running = 0;  // other runs going at the same time
  absl::Duration elapsed;
  double fraction_done = 0;  // of all the runs' events, 0 to 1
};

// The text of a line, without '\r' or a newline.
std::string FormatProgressLine(const ProgressSnapshot& snapshot);

// `line` cut to `width` columns, ending in "..." when cut.
std::string FitProgressLine(std::string line, size_t width);

// "4 s", "2 min 05 s", "1 h 02 min".
std::string FormatProgressDuration(absl::Duration duration);

// Collects the progress of a set of runs, possibly from several threads, and
// draws the line on `out` when the options allow it.
class ProgressLine {
 public:
  ProgressLine(std::ostream& out, ProgressOptions options);
  ~ProgressLine();  // Finish()
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return options_.enabled; }

  // Declares a run ahead of time: its label ("deepum on mlp"), the events of
  // its program and its iterations. Returns its index for the calls below.
  size_t AddRun(std::string label, uint64_t events, uint64_t iterations);
  // Run `index` has consumed `events` events so far and is in its
  // `iteration`-th iteration (from 1).
  void Update(size_t index, uint64_t events, uint64_t iteration);
  void RunDone(size_t index);
  // Clears the line if one was drawn; nothing is drawn after. Idempotent.
  void Finish();

 private:
  struct Run {
    std::string label;
    uint64_t events = 0;
    uint64_t iterations = 0;
    uint64_t events_done = 0;
    uint64_t iteration = 0;
    bool started = false;
    bool done = false;
  };

  ProgressSnapshot SnapshotLocked(absl::Time now) const;
  // Draws if the delay has passed and the last line is old enough.
  void MaybeDrawLocked();

  std::ostream& out_;
  const ProgressOptions options_;
  absl::Time start_;
  std::mutex mutex_;
  std::vector<Run> runs_;
  bool finished_ = false;
  bool drawn_ = false;
  absl::Time last_draw_;
  size_t last_width_ = 0;  // of the line on screen, to blank it out
};

}  // namespace umlab::cli

#endif  // UMLAB_CLI_RUNNER_PROGRESS_H_
