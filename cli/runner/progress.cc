#include "cli/runner/progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab::cli {

std::string FormatProgressDuration(absl::Duration duration) {
  const int64_t seconds = std::max<int64_t>(0, absl::ToInt64Seconds(duration));
  if (seconds < 60) return absl::StrFormat("%d s", seconds);
  if (seconds < 3600) return absl::StrFormat("%d min %02d s", seconds / 60, seconds % 60);
  return absl::StrFormat("%d h %02d min", seconds / 3600, seconds % 3600 / 60);
}

std::string FormatProgressLine(const ProgressSnapshot& s) {
  std::string line = absl::StrFormat("umlab: %d/%d runs done, %s elapsed, ", s.runs_done, s.runs,
                                     FormatProgressDuration(s.elapsed));
  if (s.fraction_done <= 0) {
    absl::StrAppend(&line, "estimating the time left");
  } else {
    const double left = absl::ToDoubleSeconds(s.elapsed) * (1 - s.fraction_done) / s.fraction_done;
    absl::StrAppend(&line, "about ", FormatProgressDuration(absl::Seconds(std::ceil(left))),
                    " left");
  }
  if (s.running.empty()) return line;
  if (s.iteration == 0) {
    absl::StrAppend(&line, ", starting");
  } else {
    absl::StrAppendFormat(&line, ", iteration %d/%d", s.iteration, s.iterations);
  }
  if (s.also_running > 0) absl::StrAppendFormat(&line, " (+%d running)", s.also_running);
  // The label last: only it is cut when the line is too wide.
  absl::StrAppend(&line, ": ", s.running);
  return line;
}

std::string FitProgressLine(std::string line, size_t width) {
  if (line.size() <= width) return line;
  constexpr absl::string_view kCut = "...";
  line.resize(width > kCut.size() ? width - kCut.size() : 0);
  absl::StrAppend(&line, kCut.substr(0, std::min(width, kCut.size())));
  return line;
}

ProgressLine::ProgressLine(std::ostream& out, ProgressOptions options)
    : out_(out), options_(std::move(options)) {
  if (options_.enabled) start_ = options_.now();
}

ProgressLine::~ProgressLine() { Finish(); }

size_t ProgressLine::AddRun(std::string label, uint64_t events, uint64_t iterations) {
  std::lock_guard<std::mutex> lock(mutex_);
  runs_.push_back(Run{.label = std::move(label), .events = events, .iterations = iterations});
  return runs_.size() - 1;
}

void ProgressLine::Update(size_t index, uint64_t events, uint64_t iteration) {
  if (!options_.enabled) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Run& run = runs_.at(index);
  run.started = true;
  run.events_done = std::min(events, run.events);
  run.iteration = iteration;
  MaybeDrawLocked();
}

void ProgressLine::RunDone(size_t index) {
  if (!options_.enabled) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Run& run = runs_.at(index);
  run.started = true;
  run.done = true;
  run.events_done = run.events;
  MaybeDrawLocked();
}

void ProgressLine::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (drawn_) {
    out_ << '\r' << std::string(last_width_, ' ') << '\r' << std::flush;
    drawn_ = false;
  }
}

ProgressSnapshot ProgressLine::SnapshotLocked(absl::Time now) const {
  ProgressSnapshot s;
  s.runs = runs_.size();
  s.elapsed = now - start_;
  uint64_t events = 0, events_done = 0;
  for (const Run& run : runs_) {
    events += run.events;
    events_done += run.events_done;
    if (run.done) {
      ++s.runs_done;
    } else if (run.started) {
      if (s.running.empty()) {
        s.running = run.label;
        s.iteration = run.iteration;
        s.iterations = run.iterations;
      } else {
        ++s.also_running;
      }
    }
  }
  s.fraction_done =
      events == 0 ? 0 : static_cast<double>(events_done) / static_cast<double>(events);
  return s;
}

void ProgressLine::MaybeDrawLocked() {
  if (finished_) return;
  const absl::Time now = options_.now();
  if (now - start_ < options_.delay) return;
  if (drawn_ && now - last_draw_ < options_.interval) return;
  const std::string line =
      FitProgressLine(FormatProgressLine(SnapshotLocked(now)), options_.width);
  // Blank out what a longer previous line leaves behind.
  const size_t padding = last_width_ > line.size() ? last_width_ - line.size() : 0;
  out_ << '\r' << line << std::string(padding, ' ') << std::flush;
  last_width_ = line.size() + padding;
  last_draw_ = now;
  drawn_ = true;
}

}  // namespace umlab::cli
