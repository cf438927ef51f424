// One run of one policy on one program: what `run`, `record`, `replay` and
// `compare` are made of.
#ifndef UMLAB_CLI_RUNNER_EXPERIMENT_H_
#define UMLAB_CLI_RUNNER_EXPERIMENT_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/backend.h"
#include "core/event_source.h"
#include "core/policy_stats.h"
#include "core/program_summary.h"
#include "core/run_series.h"
#include "core/run_stats.h"
#include "core/timeline_recorder.h"
#include "cli/runner/progress.h"
#include "emu/device_presets.h"
#include "workloads/workload.h"

namespace umlab::cli {

// Where a run's program comes from: a registered workload or a trace.
class ProgramInput {
 public:
  // `args` are "k=v" or "k=v,k=v" items, as given to --workload-arg.
  static absl::StatusOr<ProgramInput> FromWorkload(const std::string& name,
                                                   const std::vector<std::string>& args,
                                                   const ComputeSpec& compute);
  static absl::StatusOr<ProgramInput> FromTrace(const std::string& path);

  absl::StatusOr<std::unique_ptr<EventSource>> Open() const;

  // "mlp", or the recorded workload's name for a trace.
  const std::string& label() const { return label_; }
  const ProgramSummary& summary() const { return summary_; }
  // Key/value pairs that describe the program, for a trace header.
  const std::vector<std::pair<std::string, std::string>>& metadata() const {
    return metadata_;
  }
  // The device a trace was recorded for ("" for a workload).
  const std::string& recorded_device() const { return recorded_device_; }
  const Workload* workload() const { return workload_.get(); }

 private:
  absl::Status Summarize();

  std::shared_ptr<Workload> workload_;
  std::string trace_path_;
  std::string label_;
  std::string recorded_device_;
  ProgramSummary summary_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// --capacity: a fraction of the footprint ("0.5") or bytes ("8GiB"). Returns
// whole 2 MB frames; fails if that is less than one frame.
absl::StatusOr<uint64_t> ParseCapacityFrames(const std::string& text, uint64_t footprint_bytes);

// "batch", "block" or "once".
absl::StatusOr<ReplayPolicy> ParseReplayPolicy(const std::string& text);

struct RunRequest {
  const ProgramInput* program = nullptr;
  DeviceConfig device;
  std::string capacity = "0.5";
  std::string policy = "demand";
  std::string backend = "sim";
  ReplayPolicy replay = ReplayPolicy::kBatch;
  bool check_invariants = false;
  std::string record_path;  // write a .umt trace of the run here if set
  bool record_series = false;    // fill RunResult::series (the JSON's `series`)
  bool record_timeline = false;  // fill RunResult::timeline
};

// Intervals a run's series keep at most (RunSeriesRecorder).
inline constexpr size_t kSeriesIntervals = 400;
// The finer memory samples of a timeline.
inline constexpr size_t kTimelineMemoryIntervals = 4000;

struct RunResult {
  std::string policy;  // the spec as resolved, "deepum:rows=2048,..." style
  std::string backend;
  std::string workload;
  std::string device;
  uint64_t capacity_bytes = 0;
  uint64_t footprint_bytes = 0;
  uint64_t iterations = 0;
  uint64_t policy_table_bytes = 0;
  RunStats stats;
  PolicyStats policy_stats;  // the policy's own counters (Policy::ReportStats)
  std::optional<RunSeries> series;           // if the request asked for it
  std::shared_ptr<const Timeline> timeline;  // if the request asked for it
};

absl::StatusOr<RunResult> ExecuteRun(const RunRequest& request);

// Runs every request and returns the results in request order. When every
// request's backend declares parallel_runs (BackendTraits; sim does: its runs
// are pure functions of their inputs), up to `jobs` run at once on their own
// threads, with results identical to running them one by one; otherwise
// (the machine's real resources: fault-handling threads, the GPU) they run
// one at a time. jobs <= 0: one per core. With `progress`, each request is
// declared to it as a run and reports how far it has come.
std::vector<absl::StatusOr<RunResult>> ExecuteRuns(std::vector<RunRequest> requests, int jobs,
                                                    ProgressLine* progress = nullptr);

// --jobs: a whole number >= 0 (0: one per core).
absl::StatusOr<int> ParseJobs(const std::string& text);

// "demand,deepum:rows=1024,assoc=4,ideal" -> {"demand", "deepum:rows=1024,assoc=4",
// "ideal"}: an item with '=' and no ':' continues the previous policy's list.
std::vector<std::string> SplitPolicyList(const std::string& text);

}  // namespace umlab::cli

#endif  // UMLAB_CLI_RUNNER_EXPERIMENT_H_
