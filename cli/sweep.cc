#include "cli/sweep.h"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/file_text.h"
#include "cli/exit_codes.h"
#include "cli/json_text.h"
#include "cli/run_defaults.h"
#include "cli/runner/experiment.h"
#include "cli/spec_check.h"
#include "cli/sweep_grid.h"
#include "cli/sweep_slurm.h"
#include "cli/yaml_json.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

namespace fs = std::filesystem;

SweepOutcome UsageError(const std::string& message) { return {kExitUsage, message}; }

// Checks cases as `umlab run` would before running them, building each
// distinct program once.
class CaseChecker {
 public:
  // The case's expected cost, or the error its run would stop with.
  absl::StatusOr<CaseCost> Check(const CaseSpec& spec) {
    const ProgramInput* program = nullptr;
    std::string device_name = spec.device;
    if (!spec.trace.empty()) {
      absl::StatusOr<const ProgramInput*> trace = Program(spec.trace, [&] {
        return ProgramInput::FromTrace(spec.trace);
      });
      if (!trace.ok()) return trace.status();
      program = *trace;
      if (device_name.empty()) device_name = program->recorded_device();
    }
    if (device_name.empty()) device_name = kDefaultDevice;
    absl::StatusOr<DeviceConfig> device = DevicePreset(device_name);
    if (!device.ok()) return device.status();
    device = ApplyDeviceOverrides(*device, absl::StrJoin(spec.device_params, ","));
    if (!device.ok()) return device.status();
    if (program == nullptr) {
      const std::string key = absl::StrCat(spec.workload, "|", absl::StrJoin(spec.workload_args, ","),
                                           "|", device_name, "|",
                                           absl::StrJoin(spec.device_params, ","));
      absl::StatusOr<const ProgramInput*> workload = Program(key, [&] {
        return ProgramInput::FromWorkload(spec.workload, spec.workload_args, device->compute);
      });
      if (!workload.ok()) return workload.status();
      program = *workload;
    }
    const std::string backend = spec.backend.empty() ? kDefaultBackend : spec.backend;
    if (absl::Status s = CheckBackendSpec(backend); !s.ok()) return s;
    const std::string policy = spec.PolicySpec();
    if (absl::Status s = CheckPolicySpec(policy.empty() ? kDefaultPolicy : policy); !s.ok()) {
      return s;
    }
    if (absl::StatusOr<ReplayPolicy> replay =
            ParseReplayPolicy(spec.replay.empty() ? kDefaultReplay : spec.replay);
        !replay.ok()) {
      return replay.status();
    }
    if (absl::StatusOr<uint64_t> frames = ParseCapacityFrames(
            spec.capacity.empty() ? kDefaultCapacity : spec.capacity,
            program->summary().footprint_bytes);
        !frames.ok()) {
      return frames.status();
    }
    return EstimateCost(program->summary(), SplitSpec(backend).first);
  }

 private:
  template <typename Load>
  absl::StatusOr<const ProgramInput*> Program(const std::string& key, Load load) {
    std::unique_ptr<ProgramInput>& program = programs_[key];
    if (program == nullptr) {
      absl::StatusOr<ProgramInput> loaded = load();
      if (!loaded.ok()) return loaded.status();
      program = std::make_unique<ProgramInput>(*std::move(loaded));
    }
    return program.get();
  }

  std::map<std::string, std::unique_ptr<ProgramInput>> programs_;
};

// One case's self-contained shell command: skip if done, else run into a
// temporary file and rename it on success. It starts in the folder `sweep`
// ran in, so relative paths in arguments (g10's dir=) mean what they meant
// there, whichever folder an engine starts jobs in.
std::string JobLine(const std::string& cwd, const std::string& umlab, const std::string& stem,
                    const std::vector<std::string>& args) {
  std::vector<std::string> words = {ShellQuote(umlab)};
  for (const std::string& arg : args) words.push_back(ShellQuote(arg));
  // stderr goes to a .part file too, renamed to NAME.err only when the run
  // fails: a case still running (or killed) leaves no .err to read as failed.
  return absl::StrCat(
      "cd ", ShellQuote(cwd), " || exit 1; f=", ShellQuote(stem), "; test -e \"$f.json\" || { ",
      absl::StrJoin(words, " "),
      " >\"$f.json.part.$$\" 2>\"$f.err.part.$$\" && mv -f \"$f.json.part.$$\" \"$f.json\" && "
      "rm -f \"$f.err.part.$$\" \"$f.err\" || { mv -f \"$f.err.part.$$\" \"$f.err\"; "
      "rm -f \"$f.json.part.$$\"; exit 1; }; }");
}

// "local" -> 0 (one job per core), "local:N" -> N.
absl::StatusOr<int> ParseLocalRun(const std::string& text) {
  if (text == "local") return 0;
  int jobs = 0;
  if (text.starts_with("local:") && absl::SimpleAtoi(text.substr(6), &jobs) && jobs >= 1) {
    return jobs;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "--run=%s: use --run=local (one job per core) or --run=local:N (N at once); for Slurm, "
      "submit the scripts sweep writes",
      text));
}

bool HaveGnuParallel() {
  // moreutils ships another `parallel` that reads no job file.
  return std::system("parallel --version 2>/dev/null | grep -q 'GNU parallel'") == 0;
}

std::string Describe(const Grid& grid, size_t cases) {
  std::vector<std::string> axes;
  for (const GridKey& axis : grid.axes) {
    axes.push_back(absl::StrCat(axis.key, " ", axis.values.size()));
  }
  return absl::StrFormat("%d cases%s", cases,
                         axes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(axes, " x "), ")"));
}

}  // namespace

SweepOutcome RunSweep(const SweepOptions& options, std::ostream& out) {
  // Everything is checked before anything is written.
  absl::StatusOr<std::string> text = ReadFileText(options.grid_path);
  if (!text.ok()) return UsageError(absl::StrCat("grid: ", text.status().message()));
  if (options.grid_path.ends_with(".yaml") || options.grid_path.ends_with(".yml")) {
    absl::StatusOr<Json> yaml = YamlToJson(*text);
    if (!yaml.ok()) {
      return UsageError(absl::StrFormat("grid %s: %s", options.grid_path, yaml.status().message()));
    }
    text = JsonText(*yaml);
  }
  absl::StatusOr<Grid> grid = ParseGrid(options.grid_path, *text);
  if (!grid.ok()) return UsageError(std::string(grid.status().message()));
  const std::vector<SweepCase> cases = ExpandGrid(*grid);

  std::optional<int> local_jobs;
  if (!options.run.empty()) {
    absl::StatusOr<int> jobs = ParseLocalRun(options.run);
    if (!jobs.ok()) return UsageError(std::string(jobs.status().message()));
    if (!HaveGnuParallel()) {
      return UsageError(
          "--run=local needs GNU parallel (Debian package 'parallel'); or run DIR/jobs with "
          "another engine");
    }
    local_jobs = *jobs;
  }
  std::error_code error;
  const std::string umlab =
      options.umlab.empty() ? fs::read_symlink("/proc/self/exe", error).string()
                            : fs::absolute(options.umlab, error).string();
  if (error || !fs::is_regular_file(umlab, error)) {
    return UsageError(absl::StrFormat("--umlab=%s: no such program", options.umlab));
  }

  std::map<std::string, const SweepCase*> names;
  std::vector<CaseCost> costs;
  CaseChecker checker;
  for (const SweepCase& c : cases) {
    if (auto [it, inserted] = names.emplace(c.name, &c); !inserted) {
      return UsageError(absl::StrFormat("grid %s: two cases run the same arguments (%s)",
                                        options.grid_path, c.name));
    }
    absl::StatusOr<CaseCost> cost = checker.Check(c.spec);
    if (!cost.ok()) {
      return UsageError(absl::StrFormat("grid %s, case %s: %s", options.grid_path, c.name,
                                        cost.status().message()));
    }
    costs.push_back(*cost);
  }

  std::string dir = options.results_dir;
  if (dir.empty()) {
    fs::path stem = options.grid_path;
    stem.replace_extension(".sweep");
    dir = stem.string();
  }
  dir = fs::absolute(dir, error).lexically_normal().string();
  const fs::path cases_dir = fs::path(dir) / "cases";
  fs::create_directories(cases_dir, error);
  if (error) {
    return {kExitFailure, absl::StrFormat("cannot create %s: %s", cases_dir.string(),
                                          error.message())};
  }

  const std::string cwd = fs::current_path(error).string();
  std::vector<std::string> jobs, pending;
  std::vector<SlurmRequest> requests;
  Json manifest = {{"grid", fs::absolute(options.grid_path, error).lexically_normal().string()},
                   {"axes", Json::array()},
                   {"cases", Json::array()}};
  for (const GridKey& axis : grid->axes) manifest["axes"].push_back(axis.key);
  double total_seconds = 0, slowest_seconds = 0;
  bool calibrated = true;
  for (size_t i = 0; i < cases.size(); ++i) {
    const SweepCase& c = cases[i];
    const std::string stem = (cases_dir / c.name).string();
    jobs.push_back(JobLine(cwd, umlab, stem, c.args));
    if (!fs::exists(stem + ".json", error)) pending.push_back(jobs.back());
    requests.push_back(RequestFor(costs[i]));
    total_seconds += costs[i].seconds;
    slowest_seconds = std::max(slowest_seconds, costs[i].seconds);
    calibrated = calibrated && costs[i].calibrated;
    Json coordinates = Json::object();
    for (const auto& [key, value] : c.coordinates) coordinates[key] = value;
    manifest["cases"].push_back(
        Json{{"name", c.name}, {"grid", coordinates}, {"command", jobs.back()}});
  }
  auto write = [&](const std::string& name, const std::string& contents) {
    return WriteFileAtomically((fs::path(dir) / name).string(), contents);
  };
  if (absl::Status s = write("jobs", absl::StrCat(absl::StrJoin(jobs, "\n"), "\n")); !s.ok()) {
    return {kExitFailure, std::string(s.message())};
  }
  if (absl::Status s = write("sweep.json", JsonTextListPerLine(manifest, "cases")); !s.ok()) {
    return {kExitFailure, std::string(s.message())};
  }
  absl::StatusOr<std::vector<std::string>> arrays =
      WriteSlurmScripts(dir, jobs, requests, grid->slurm);
  if (!arrays.ok()) return {kExitFailure, std::string(arrays.status().message())};

  out << absl::StrFormat("grid %s: %s\n", options.grid_path, Describe(*grid, cases.size()))
      << absl::StrFormat("results in %s: %d done, %d to run\n", dir,
                         cases.size() - pending.size(), pending.size())
      << absl::StrFormat(
             "estimated cost on one core: %.0f s in all, %.1f s for the slowest case%s\n",
             total_seconds, slowest_seconds,
             calibrated ? "" : " (a rough guess: the estimate is calibrated on the sim backend)")
      << absl::StrFormat("GNU parallel: parallel --joblog %s < %s\n",
                         ShellQuote(dir + "/joblog"), ShellQuote(dir + "/jobs"))
      << absl::StrFormat("Slurm: %s submits %d job array(s):\n",
                         ShellQuote(dir + "/slurm/submit.sh"), arrays->size());
  for (const std::string& line : *arrays) out << "  " << line << "\n";

  if (!local_jobs.has_value()) {
    out << absl::StrFormat("when they are done: umlab merge %s\n", ShellQuote(dir));
    return {kExitOk, ""};
  }
  if (!pending.empty()) {
    if (absl::Status s = write("pending", absl::StrCat(absl::StrJoin(pending, "\n"), "\n"));
        !s.ok()) {
      return {kExitFailure, std::string(s.message())};
    }
    const std::string command = absl::StrCat(
        "parallel ", *local_jobs > 0 ? absl::StrCat("--jobs ", *local_jobs, " ") : "",
        "--joblog ", ShellQuote(dir + "/joblog"), " < ", ShellQuote(dir + "/pending"));
    out << "running: " << command << "\n" << std::flush;
    const int status = std::system(command.c_str());
    // parallel's exit status counts failed jobs; the result files say which.
    if (status == -1 || !WIFEXITED(status)) {
      return {kExitFailure, absl::StrFormat("could not run: %s", command)};
    }
  }
  size_t failed = 0;
  for (const SweepCase& c : cases) {
    if (!fs::exists((cases_dir / (c.name + ".json")).string(), error)) ++failed;
  }
  out << absl::StrFormat("ran %d cases: %d of %d done; merge with: umlab merge %s\n",
                         pending.size(), cases.size() - failed, cases.size(), ShellQuote(dir));
  if (failed > 0) {
    return {kExitFailure,
            absl::StrFormat("%d case(s) failed; 'umlab merge %s' names them", failed, dir)};
  }
  return {kExitOk, ""};
}

}  // namespace umlab::cli
