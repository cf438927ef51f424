#include "cli/runner/experiment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/byte_size.h"
#include "core/engine.h"
#include "core/event_sink.h"
#include "core/policy.h"
#include "core/trace_reader.h"
#include "core/trace_writer.h"
#include "core/backend_registry.h"

namespace umlab::cli {
namespace {

// Writes what the backend reports into a trace; remembers the first error.
class TraceRecorder final : public EventSink {
 public:
  explicit TraceRecorder(TraceWriter& writer) : writer_(writer) {}
  void Record(const Event& event) override {
    if (status_.ok()) status_ = writer_.Append(event);
  }
  const absl::Status& status() const { return status_; }

 private:
  TraceWriter& writer_;
  absl::Status status_;
};

// Tells the progress line how far one run has come: events consumed and the
// iteration they are in. Reports every few thousand events, so the line's
// lock and clock cost nothing next to the run.
class ProgressSource final : public EventSource {
 public:
  ProgressSource(EventSource& inner, ProgressLine& line, size_t run)
      : inner_(inner), line_(line), run_(run) {}
  bool Next(Event& event) override {
    const bool more = inner_.Next(event);
    if (more && event.kind == EventKind::kIterationBegin) ++iteration_;
    if ((++seen_ & 0xfff) == 0) line_.Update(run_, seen_, iteration_);
    return more;
  }
  absl::Status status() const override { return inner_.status(); }

 private:
  EventSource& inner_;
  ProgressLine& line_;
  const size_t run_;
  uint64_t seen_ = 0;
  uint64_t iteration_ = 0;  // iteration markers seen: the current one, from 1
};

// ExecuteRun, reporting to `line` (when given and enabled) as its run `run`.
absl::StatusOr<RunResult> ExecuteRunShowingProgress(const RunRequest& request,
                                                    ProgressLine* line, size_t run);

}  // namespace

absl::StatusOr<ProgramInput> ProgramInput::FromWorkload(const std::string& name,
                                                        const std::vector<std::string>& args,
                                                        const ComputeSpec& compute) {
  ProgramInput input;
  const std::string overrides = absl::StrJoin(args, ",");
  // A name may carry parameters of its own (`gpt2-small:batch=1`): the
  // --workload-arg ones join them.
  const char joiner = name.find(':') == std::string::npos ? ':' : ',';
  absl::StatusOr<std::unique_ptr<Workload>> workload = Workloads().Create(
      overrides.empty() ? name : absl::StrCat(name, std::string(1, joiner), overrides), compute);
  if (!workload.ok()) return workload.status();
  input.workload_ = std::move(*workload);
  input.label_ = name;
  input.metadata_ = {{"workload", name}, {"workload_args", overrides}};
  if (absl::Status s = input.Summarize(); !s.ok()) return s;
  return input;
}

absl::StatusOr<ProgramInput> ProgramInput::FromTrace(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  ProgramInput input;
  input.trace_path_ = path;
  const std::string workload = (*reader)->Metadata("workload");
  input.label_ = workload.empty() ? path : workload;
  input.recorded_device_ = (*reader)->Metadata("device");
  input.metadata_ = (*reader)->metadata();
  if (absl::Status s = input.Summarize(); !s.ok()) return s;
  return input;
}

absl::StatusOr<std::unique_ptr<EventSource>> ProgramInput::Open() const {
  if (workload_ != nullptr) return workload_->Open();
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(trace_path_);
  if (!reader.ok()) return reader.status();
  return std::unique_ptr<EventSource>(std::move(*reader));
}

absl::Status ProgramInput::Summarize() {
  absl::StatusOr<std::unique_ptr<EventSource>> source = Open();
  if (!source.ok()) return source.status();
  absl::StatusOr<ProgramSummary> summary = SummarizeProgram(**source);
  if (!summary.ok()) return summary.status();
  summary_ = *summary;
  if (summary_.footprint_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "program '%s' allocates and touches no memory; nothing to run", label_));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParseCapacityFrames(const std::string& text,
                                             uint64_t footprint_bytes) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  double fraction = 0;
  uint64_t bytes = 0;
  if (absl::SimpleAtod(trimmed, &fraction)) {
    if (!(fraction > 0) || fraction > 1000) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--capacity=%s: a fraction of the footprint must be above 0 (e.g. 0.5); "
          "for bytes add a unit, e.g. 8GiB",
          text));
    }
    // A trace can claim any footprint; a product past 2^64 would make the
    // conversion undefined.
    const double product = fraction * static_cast<double>(footprint_bytes);
    if (!(product < 0x1p64)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--capacity=%s of a %s footprint is more than 16 EiB; ask for less", text,
          FormatBytes(footprint_bytes)));
    }
    bytes = static_cast<uint64_t>(product);
  } else {
    absl::StatusOr<uint64_t> parsed = ParseByteSize(trimmed);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--capacity=%s is neither a fraction of the footprint (0.5) nor a size (8GiB)",
          text));
    }
    bytes = *parsed;
  }
  const uint64_t frames = bytes / kBlockSize;
  if (frames == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--capacity=%s gives %s, less than one 2 MiB frame (the footprint is %s); "
        "ask for more",
        text, FormatBytes(bytes), FormatBytes(footprint_bytes)));
  }
  return frames;
}

absl::StatusOr<ReplayPolicy> ParseReplayPolicy(const std::string& text) {
  if (text == "batch") return ReplayPolicy::kBatch;
  if (text == "block") return ReplayPolicy::kBlock;
  if (text == "once") return ReplayPolicy::kOnce;
  return absl::InvalidArgumentError(
      absl::StrFormat("--replay=%s: use batch, block or once", text));
}

std::vector<std::string> SplitPolicyList(const std::string& text) {
  std::vector<std::string> specs;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const bool continues = item.find('=') != absl::string_view::npos &&
                           item.find(':') == absl::string_view::npos;
    if (continues && !specs.empty()) {
      const bool first_param = specs.back().find(':') == std::string::npos;
      absl::StrAppend(&specs.back(), first_param ? ":" : ",", item);
    } else {
      specs.emplace_back(absl::StripAsciiWhitespace(item));
    }
  }
  return specs;
}

absl::StatusOr<RunResult> ExecuteRun(const RunRequest& request) {
  return ExecuteRunShowingProgress(request, nullptr, 0);
}

namespace {

absl::StatusOr<RunResult> ExecuteRunShowingProgress(const RunRequest& request,
                                                    ProgressLine* line, size_t run) {
  const ProgramInput& program = *request.program;
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(request.policy);
  if (!policy.ok()) return policy.status();

  RunResult result;
  result.policy = request.policy;
  result.backend = request.backend;
  result.workload = program.label();
  result.device = request.device.name;
  result.footprint_bytes = program.summary().footprint_bytes;
  result.iterations = program.summary().iterations;
  absl::StatusOr<uint64_t> frames =
      ParseCapacityFrames(request.capacity, result.footprint_bytes);
  if (!frames.ok()) return frames.status();
  const bool unlimited = (*policy)->UnlimitedCapacity();
  const uint64_t capacity_frames = unlimited ? kUnlimitedFrames : *frames;
  result.capacity_bytes = *frames * kBlockSize;

  if (request.device.link.storage.present) {
    const BackendRegistry::Entry* entry = Backends().Find(SplitSpec(request.backend).first);
    if (entry != nullptr && !entry->traits.storage_tier) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device %s has a storage tier (ssd=true), which the %s backend does not model; run "
          "it on --backend=sim or uffd, or set --device-param ssd=false",
          request.device.name, entry->name));
    }
  }
  EngineConfig engine_config = EngineConfigFor(request.device);
  engine_config.replay = request.replay;
  engine_config.check_invariants = request.check_invariants;

  absl::StatusOr<std::unique_ptr<Backend>> backend =
      Backends().Create(request.backend, request.device, capacity_frames);
  if (!backend.ok()) return backend.status();
  result.backend = (*backend)->name();
  if ((*policy)->MapsRemotely() && !(*backend)->MapsRemotely()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy %s maps pages remotely (direct host access), which --backend=%s cannot do; "
        "use the sim (faults=batched, policy_from=driver), uffd or cuda backend",
        request.policy, request.backend));
  }
  Engine engine(**backend, **policy, capacity_frames, engine_config);

  if ((*policy)->PlansAhead()) {
    absl::StatusOr<std::unique_ptr<EventSource>> ahead = program.Open();
    if (!ahead.ok()) return ahead.status();
    if (absl::Status planned =
            PlanAhead(**policy, **ahead, request.device, result.capacity_bytes);
        !planned.ok()) {
      return planned;
    }
  }

  std::unique_ptr<TraceWriter> writer;
  std::unique_ptr<TraceRecorder> recorder;
  if (!request.record_path.empty()) {
    std::vector<std::pair<std::string, std::string>> metadata = program.metadata();
    metadata.emplace_back("device", request.device.name);
    metadata.emplace_back("policy", request.policy);
    metadata.emplace_back("backend", request.backend);
    metadata.emplace_back("capacity_bytes", absl::StrCat(result.capacity_bytes));
    metadata.emplace_back("footprint_bytes", absl::StrCat(result.footprint_bytes));
    absl::StatusOr<std::unique_ptr<TraceWriter>> created =
        TraceWriter::Create(request.record_path, metadata);
    if (!created.ok()) return created.status();
    writer = std::move(*created);
    recorder = std::make_unique<TraceRecorder>(*writer);
    engine.set_recorder(recorder.get());
  }

  std::unique_ptr<RunSeriesRecorder> series;
  if (request.record_series) {
    series = std::make_unique<RunSeriesRecorder>(program.summary().compute_ns, kSeriesIntervals);
    engine.AddObserver(series.get());
  }
  std::unique_ptr<TimelineRecorder> timeline;
  if (request.record_timeline) {
    timeline = std::make_unique<TimelineRecorder>(program.summary().compute_ns,
                                                  kTimelineMemoryIntervals);
    engine.AddObserver(timeline.get());
  }

  absl::StatusOr<std::unique_ptr<EventSource>> source = program.Open();
  if (!source.ok()) return source.status();
  EventSource* input = source->get();
  std::unique_ptr<ProgressSource> progress;
  if (line != nullptr && line->enabled()) {
    progress = std::make_unique<ProgressSource>(**source, *line, run);
    input = progress.get();
  }
  absl::Status status = (*backend)->Run(*input, engine, recorder.get());
  if (status.ok() && request.check_invariants) status = engine.CheckInvariants();
  if (status.ok() && request.check_invariants) status = (*backend)->CheckConsistency(engine);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrFormat("policy %s on %s: %s", request.policy,
                                                       program.label(), status.message()));
  }
  if (recorder != nullptr) {
    if (!recorder->status().ok()) return recorder->status();
    if (absl::Status closed = writer->Close(); !closed.ok()) return closed;
  }
  result.stats = engine.stats();
  result.policy_table_bytes = (*policy)->TableBytes();
  (*policy)->ReportStats(result.policy_stats);
  if (series != nullptr) result.series = series->series();
  if (timeline != nullptr) {
    result.timeline = std::make_shared<Timeline>(timeline->timeline());
  }
  return result;
}

}  // namespace

std::vector<absl::StatusOr<RunResult>> ExecuteRuns(std::vector<RunRequest> requests,
                                                    int jobs, ProgressLine* progress) {
  // Parallel only when every run's backend says its runs may share the
  // process; an unknown backend runs alone and fails in ExecuteRun.
  const bool all_parallel =
      std::all_of(requests.begin(), requests.end(), [](const RunRequest& r) {
        const BackendRegistry::Entry* entry = Backends().Find(SplitSpec(r.backend).first);
        return entry != nullptr && entry->traits.parallel_runs;
      });
  if (jobs <= 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t threads = all_parallel ? std::min<size_t>(jobs, requests.size()) : 1;
  std::vector<absl::StatusOr<RunResult>> results(requests.size(),
                                                 absl::UnknownError("not run"));
  // One progress line for all the runs, declared before any starts.
  std::vector<size_t> progress_runs;
  for (const RunRequest& request : requests) {
    if (progress == nullptr) break;
    const ProgramSummary& summary = request.program->summary();
    progress_runs.push_back(
        progress->AddRun(absl::StrCat(request.policy, " on ", request.program->label()),
                         summary.events, summary.iterations));
  }
  const auto execute = [&](size_t i) {
    const size_t run = progress == nullptr ? 0 : progress_runs[i];
    results[i] = ExecuteRunShowingProgress(requests[i], progress, run);
    if (progress != nullptr) progress->RunDone(run);
  };
  if (threads <= 1) {
    for (size_t i = 0; i < requests.size(); ++i) execute(i);
    return results;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++) execute(i);
    });
  }
  for (std::thread& worker : workers) worker.join();
  return results;
}

absl::StatusOr<int> ParseJobs(const std::string& text) {
  int jobs = 0;
  if (!absl::SimpleAtoi(text, &jobs) || jobs < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--jobs=%s: give a whole number of parallel runs, or 0 for one per core", text));
  }
  return jobs;
}

}  // namespace umlab::cli
