#include "cli/commands.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/arguments.h"
#include "cli/runner/experiment.h"
#include "cli/runner/cluster_study.h"
#include "cli/runner/progress.h"
#include "cli/import_g10.h"
#include "cli/output_format.h"
#include "cli/report.h"
#include "cli/regress.h"
#include "cli/run_defaults.h"
#include "cli/snurhac_report.h"
#include "cli/text_table.h"
#include "cli/spec_check.h"
#include "cli/sweep.h"
#include "cli/sweep_merge.h"
#include "cli/torch_command.h"
#include "cli/trace_summary.h"
#include "cli/visual_outputs.h"
#include "core/byte_size.h"
#include "core/policy.h"
#include "core/program_summary.h"
#include "core/backend_registry.h"
#include "emu/device_presets.h"
#include "emu/g10_config.h"
#include "emu/snurhac/cluster_config.h"
#include "emu/snurhac/real_cluster.h"
#include "workloads/grid_workload.h"
#include "workloads/workload.h"

namespace umlab::cli {
namespace {

// A failure with the exit code it deserves.
struct Failure {
  int code;
  std::string message;
};

struct Context {
  const Arguments& args;
  std::ostream& out;
  std::ostream& err;
  int err_columns;  // 0: stderr is not a terminal

  // The progress line of this command's runs (cli/runner/progress.h).
  ProgressOptions Progress() const {
    ProgressOptions options;
    options.enabled = err_columns > 0 && !args.Has("quiet");
    if (options.enabled) options.width = static_cast<size_t>(err_columns - 1);
    return options;
  }
};

using Handler = std::function<std::optional<Failure>(const Context&)>;

struct Command {
  std::string name;
  std::string usage;    // after "umlab NAME"
  std::string summary;  // one line
  std::string details;  // paragraphs for --help
  std::vector<OptionSpec> options;
  Handler handler;
};

Failure Usage(const absl::Status& status) { return Failure{kExitUsage, std::string(status.message())}; }
Failure RunFailed(const absl::Status& status) {
  return Failure{kExitFailure, std::string(status.message())};
}

// --- Shared option groups -------------------------------------------------

std::vector<OptionSpec> ProgramOptions() {
  return {
      {"workload", "NAME", "built-in workload to run (see 'umlab workloads')", kDefaultWorkload},
      {"workload-arg", "K=V", "workload parameter, e.g. batch=512 or layers=4,hidden=2048", "",
       true},
  };
}

OptionSpec QuietOption() {
  return {"quiet", "",
          "no progress line (otherwise drawn on stderr, when it is a terminal, once the runs "
          "have taken 2 s)"};
}

std::vector<OptionSpec> MachineOptions() {
  return {
      {"backend", "SPEC", "where to run, with parameters: sim (see 'umlab backends')", "sim"},
      {"capacity", "C",
       "device memory: a fraction of the program's footprint (0.5) or a size (8GiB); a device "
       "with its own memory_gib (g10-a100) defaults to that",
       "0.5"},
      {"device", "PRESET",
       absl::StrCat("device preset: ", DevicePresets().Names(),
                    "; or a G10 config file, NAME.config"),
       kDefaultDevice},
      {"device-param", "K=V",
       "override a preset value, e.g. h2d_gbps=12 (see 'umlab devices')", "", true},
      {"replay", "POLICY", "when stalled accessors retry: batch, block or once", "batch"},
      {"check-invariants", "",
       "check capacity, byte conservation and page states after every engine step (slow)"},
      {"dilation", "X",
       "stretch modelled time by X on a real-time backend (uffd), so the host can keep up; "
       "reported times stay modelled (wall / X)"},
      {"verify", "", "check every byte read against the value written (uffd backend)"},
      QuietOption(),
  };
}

// run, record, replay and compare print runs, in any of RunFormats().
std::vector<OptionSpec> RunFormatOption() { return {FormatOption(RunFormats())}; }

OptionSpec JobsOption() {
  return {"jobs", "N",
          "runs at once on a backend that allows it, such as sim (0: one per core; other "
          "backends run one at a time); results do not depend on it",
          "0"};
}

template <typename... Groups>
std::vector<OptionSpec> Join(Groups... groups) {
  std::vector<OptionSpec> all;
  (all.insert(all.end(), groups.begin(), groups.end()), ...);
  return all;
}

// --- Shared resolution ----------------------------------------------------

// A preset, or a G10 config file (NAME.config; emu/g10_config.h), with the
// --device-param overrides.
absl::StatusOr<DeviceConfig> ResolveDevice(const Arguments& args, const std::string& fallback) {
  const std::string name = args.GetOr("device", fallback);
  absl::StatusOr<DeviceConfig> device;
  if (absl::EndsWith(name, ".config")) {
    absl::StatusOr<G10Machine> machine = ReadG10Config(name);
    if (!machine.ok()) return machine.status();
    device = machine->device;
  } else {
    device = DevicePreset(name);
  }
  if (!device.ok()) return device.status();
  return ApplyDeviceOverrides(*device, absl::StrJoin(args.GetAll("device-param"), ","));
}

struct Setup {
  DeviceConfig device;
  RunRequest request;
  const OutputFormat<Runs>* format = nullptr;
  int jobs = 1;  // parallel runs, for compare
};

// Everything but the program and the policy, from the options.
std::optional<Failure> ResolveSetup(const Arguments& args, const std::string& default_device,
                                    Setup& setup) {
  absl::StatusOr<DeviceConfig> device = ResolveDevice(args, default_device);
  if (!device.ok()) return Usage(device.status());
  absl::StatusOr<ReplayPolicy> replay = ParseReplayPolicy(args.GetOr("replay", kDefaultReplay));
  if (!replay.ok()) return Usage(replay.status());
  absl::StatusOr<const OutputFormat<Runs>*> format =
      FindFormat(RunFormats(), args.GetOr("format", RunFormats().front().name));
  if (!format.ok()) return Usage(format.status());
  setup.device = *device;
  setup.format = *format;
  setup.request.device = *device;
  setup.request.replay = *replay;
  // A device with its own memory (g10-a100, a G10 config) sets the capacity
  // unless --capacity says else.
  setup.request.capacity = args.GetOr(
      "capacity", device->memory_bytes > 0 ? absl::StrCat(device->memory_bytes, "B")
                                           : kDefaultCapacity);
  setup.request.backend = args.GetOr("backend", kDefaultBackend);
  // --dilation and --verify are backend parameters; a backend that does not
  // declare them rejects them below with a usage error.
  std::vector<std::string> folded;
  if (const std::optional<std::string> dilation = args.Get("dilation")) {
    folded.push_back("dilation=" + *dilation);
  }
  if (args.Has("verify")) folded.push_back("verify=true");
  if (!folded.empty()) {
    // StrAppend, not `+=` of a `const char* + std::string` temporary: GCC 12
    // at -O3 reports a false -Wrestrict inside std::string for the latter.
    absl::StrAppend(&setup.request.backend,
                    setup.request.backend.find(':') == std::string::npos ? ":" : ",",
                    absl::StrJoin(folded, ","));
  }
  absl::StatusOr<int> jobs = ParseJobs(args.GetOr("jobs", "0"));
  if (!jobs.ok()) return Usage(jobs.status());
  setup.jobs = *jobs;
  setup.request.check_invariants = args.Has("check-invariants");
  if (absl::Status backend = CheckBackendSpec(setup.request.backend); !backend.ok()) {
    return Usage(backend);
  }
  return std::nullopt;
}

std::optional<Failure> LoadWorkload(const Arguments& args, const DeviceConfig& device,
                                    std::optional<ProgramInput>& program) {
  absl::StatusOr<ProgramInput> input = ProgramInput::FromWorkload(
      args.GetOr("workload", kDefaultWorkload), args.GetAll("workload-arg"), device.compute);
  if (!input.ok()) return Usage(input.status());
  program = std::move(*input);
  return std::nullopt;
}

std::optional<Failure> LoadTrace(const std::string& path, std::optional<ProgramInput>& program) {
  absl::StatusOr<ProgramInput> input = ProgramInput::FromTrace(path);
  if (!input.ok()) return RunFailed(input.status());
  program = std::move(*input);
  return std::nullopt;
}

// `leave_out_refusals`: the policies were not named but defaulted, so one
// that refuses this capacity (IsPolicyRefusal) is left out with a note.
std::optional<Failure> RunAndReport(const Context& ctx, Setup& setup,
                                    const ProgramInput& program,
                                    const std::vector<std::string>& policies,
                                    bool leave_out_refusals = false) {
  // Fail fast on a bad capacity before any run.
  if (absl::StatusOr<uint64_t> frames =
          ParseCapacityFrames(setup.request.capacity, program.summary().footprint_bytes);
      !frames.ok()) {
    return Usage(frames.status());
  }
  for (const std::string& spec : policies) {
    if (absl::Status policy = CheckPolicySpec(spec); !policy.ok()) return Usage(policy);
  }
  setup.request.program = &program;
  setup.request.record_series = ctx.args.Has("series") || ctx.args.Has("report");
  setup.request.record_timeline = ctx.args.Has("timeline");
  std::vector<RunRequest> requests;
  for (const std::string& spec : policies) {
    requests.push_back(setup.request);
    requests.back().policy = spec;
  }
  ProgressLine progress(ctx.err, ctx.Progress());
  std::vector<absl::StatusOr<RunResult>> runs =
      ExecuteRuns(std::move(requests), setup.jobs, &progress);
  progress.Finish();  // gone before the report or an error is printed
  std::vector<RunResult> results;
  std::optional<absl::Status> failed;  // the first run that failed
  for (absl::StatusOr<RunResult>& result : runs) {
    if (!result.ok() && leave_out_refusals && IsPolicyRefusal(result.status())) {
      ctx.err << "umlab: left out " << result.status().message() << "\n";
      continue;
    }
    if (!result.ok()) {
      if (!failed.has_value()) failed = result.status();
      continue;
    }
    results.push_back(*std::move(result));
  }
  if (results.empty()) {
    return RunFailed(failed.value_or(
        absl::FailedPreconditionError("every policy refused this capacity")));
  }
  // The runs that finished are reported even when another failed: a long
  // comparison loses one row, not all of them. The command still fails.
  ctx.out << setup.format->render(results);
  if (failed.has_value()) return RunFailed(*failed);
  if (const std::optional<std::string> path = ctx.args.Get("timeline")) {
    if (absl::Status s = TimelineFromRun(results.front(), *path); !s.ok()) return RunFailed(s);
  }
  if (const std::optional<std::string> path = ctx.args.Get("report")) {
    if (absl::Status s = ReportFromRuns(results, *path); !s.ok()) return RunFailed(s);
  }
  return std::nullopt;
}

// `umlab report` and `umlab timeline`: positional inputs, one --output.
std::optional<Failure> WriteVisual(
    const Context& ctx, const std::string& usage, bool one_input,
    const std::function<absl::Status(const std::vector<std::string>&, const std::string&)>&
        write) {
  const std::vector<std::string>& inputs = ctx.args.positional();
  const std::optional<std::string> output = ctx.args.Get("output");
  if (inputs.empty() || (one_input && inputs.size() != 1) || !output.has_value()) {
    return Usage(absl::InvalidArgumentError(usage));
  }
  if (absl::Status s = write(inputs, *output); !s.ok()) return RunFailed(s);
  return std::nullopt;
}

// The default comparison: the naive baseline first, the bound last.
std::vector<std::string> DefaultPolicies() {
  std::vector<std::string> names;
  for (const PolicyRegistry::Entry* entry : Policies().Entries()) {
    if (entry->name != "demand" && entry->name != "ideal") names.push_back(entry->name);
  }
  names.insert(names.begin(), "demand");
  names.push_back("ideal");
  return names;
}

// --- Commands ---------------------------------------------------------------

std::optional<Failure> RunCommand(const Context& ctx) {
  Setup setup;
  if (auto failure = ResolveSetup(ctx.args, kDefaultDevice, setup)) return failure;
  std::optional<ProgramInput> program;
  if (auto failure = LoadWorkload(ctx.args, setup.device, program)) return failure;
  return RunAndReport(ctx, setup, *program, {ctx.args.GetOr("policy", kDefaultPolicy)});
}

std::optional<Failure> RecordCommand(const Context& ctx) {
  const std::optional<std::string> output = ctx.args.Get("output");
  if (!output.has_value()) {
    return Usage(absl::InvalidArgumentError(
        "umlab record needs --output=FILE.umt, the trace to write"));
  }
  Setup setup;
  if (auto failure = ResolveSetup(ctx.args, kDefaultDevice, setup)) return failure;
  std::optional<ProgramInput> program;
  if (auto failure = LoadWorkload(ctx.args, setup.device, program)) return failure;
  setup.request.record_path = *output;
  return RunAndReport(ctx, setup, *program, {ctx.args.GetOr("policy", kDefaultPolicy)});
}

std::optional<Failure> ReplayCommand(const Context& ctx) {
  if (ctx.args.positional().size() != 1) {
    return Usage(absl::InvalidArgumentError("umlab replay takes one trace: umlab replay FILE.umt"));
  }
  std::optional<ProgramInput> program;
  if (auto failure = LoadTrace(ctx.args.positional()[0], program)) return failure;
  const std::string device =
      program->recorded_device().empty() ? kDefaultDevice : program->recorded_device();
  Setup setup;
  if (auto failure = ResolveSetup(ctx.args, device, setup)) return failure;
  return RunAndReport(ctx, setup, *program, {ctx.args.GetOr("policy", kDefaultPolicy)});
}

std::optional<Failure> CompareCommand(const Context& ctx) {
  std::optional<ProgramInput> program;
  std::string device = kDefaultDevice;
  if (const std::optional<std::string> trace = ctx.args.Get("trace")) {
    if (ctx.args.Has("workload")) {
      return Usage(absl::InvalidArgumentError("give --workload or --trace, not both"));
    }
    if (auto failure = LoadTrace(*trace, program)) return failure;
    if (!program->recorded_device().empty()) device = program->recorded_device();
  }
  Setup setup;
  if (auto failure = ResolveSetup(ctx.args, device, setup)) return failure;
  if (!program.has_value()) {
    if (auto failure = LoadWorkload(ctx.args, setup.device, program)) return failure;
  }
  std::vector<std::string> policies;
  for (const std::string& list : ctx.args.GetAll("policies")) {
    for (std::string& spec : SplitPolicyList(list)) policies.push_back(std::move(spec));
  }
  const bool defaulted = policies.empty();
  if (defaulted) policies = DefaultPolicies();
  return RunAndReport(ctx, setup, *program, policies, /*leave_out_refusals=*/defaulted);
}

std::optional<Failure> InspectCommand(const Context& ctx) {
  if (ctx.args.positional().size() != 1) {
    return Usage(absl::InvalidArgumentError("umlab inspect takes one trace: umlab inspect FILE.umt"));
  }
  absl::StatusOr<const OutputFormat<TraceSummary>*> format = FindFormat(
      TraceSummaryFormats(), ctx.args.GetOr("format", TraceSummaryFormats().front().name));
  if (!format.ok()) return Usage(format.status());
  absl::StatusOr<TraceSummary> summary = SummarizeTrace(ctx.args.positional()[0]);
  if (!summary.ok()) return RunFailed(summary.status());
  ctx.out << (*format)->render(*summary);
  return std::nullopt;
}

// One line per parameter: name, type, default, range (numbers that have
// one) or choices (strings that have them), help.
std::string FormatParams(const std::vector<ParamInfo>& params) {
  std::string out;
  for (const ParamInfo& p : params) {
    const std::string allowed = p.range.bounded()      ? "range " + p.range.ToString()
                                : !p.choices.empty() ? "one of " + absl::StrJoin(p.choices, "|")
                                                     : "";
    out += absl::StrFormat("      %-18s %-7s default %-10s %-22s %s\n", p.name,
                           ParamTypeName(p.type),
                           p.default_value.empty() ? "\"\"" : p.default_value, allowed, p.help);
  }
  return out;
}

std::optional<Failure> PoliciesCommand(const Context& ctx) {
  ctx.out << "policies (use --policy=NAME or NAME:key=value,key=value):\n";
  for (const PolicyRegistry::Entry* entry : Policies().Entries()) {
    ctx.out << absl::StrFormat("  %-16s %s\n", entry->name, entry->description);
    ctx.out << FormatParams(entry->params);
  }
  return std::nullopt;
}

std::optional<Failure> WorkloadsCommand(const Context& ctx) {
  if (const std::optional<std::string> name = ctx.args.Get("describe")) {
    absl::StatusOr<DeviceConfig> device = ResolveDevice(ctx.args, kDefaultDevice);
    if (!device.ok()) return Usage(device.status());
    absl::StatusOr<ProgramInput> program =
        ProgramInput::FromWorkload(*name, ctx.args.GetAll("workload-arg"), device->compute);
    if (!program.ok()) return Usage(program.status());
    const ProgramSummary& s = program->summary();
    ctx.out << program->workload()->Describe();
    ctx.out << absl::StrFormat(
        "footprint (peak reserved, whole 2 MiB blocks): %s\n"
        "%d iterations, %d kernels, %d page accesses, %.3f ms of compute on %s\n",
        FormatBytes(s.footprint_bytes), s.iterations, s.kernels, s.accessed_pages,
        static_cast<double>(s.compute_ns) / 1e6, device->name);
    return std::nullopt;
  }
  ctx.out << "workloads (use --workload=NAME --workload-arg key=value):\n";
  for (const WorkloadRegistry::Entry* entry : Workloads().Entries()) {
    ctx.out << absl::StrFormat("  %-16s %s\n", entry->name, entry->description);
    ctx.out << FormatParams(entry->params);
  }
  return std::nullopt;
}

std::optional<Failure> BackendsCommand(const Context& ctx) {
  ctx.out << "backends (use --backend=NAME or NAME:key=value):\n";
  for (const BackendRegistry::Entry* entry : Backends().Entries()) {
    ctx.out << absl::StrFormat("  %-16s %s\n", entry->name, entry->description);
    ctx.out << FormatParams(entry->params);
  }
  return std::nullopt;
}

std::optional<Failure> DevicesCommand(const Context& ctx) {
  ctx.out << "device presets (use --device=NAME --device-param key=value):\n";
  for (const DevicePresetEntry* entry : DevicePresets().Entries()) {
    ctx.out << absl::StrFormat("  %-16s %s\n", entry->name, entry->description);
    ctx.out << FormatParams(DeviceParams(*DevicePreset(entry->name)));
  }
  return std::nullopt;
}

// `umlab snurhac --backend=uffd`: the cluster on real processes
// (emu/snurhac/real_cluster.h), each run next to the sim's at the same
// scale, scheme none and unlimited memory, so that the counters compare.
std::optional<Failure> SnurhacRealCommand(const Context& ctx, const std::string& backend,
                                          const DeviceConfig& device) {
  const snurhac::RealClusterRunner* runner = snurhac::FindRealClusterRunner(backend);
  if (runner == nullptr) {
    return Usage(absl::InvalidArgumentError(absl::StrFormat(
        "--backend takes sim or uffd for umlab snurhac, not '%s'", backend)));
  }
  if (ctx.args.GetOr("schemes", "none") != "none" || ctx.args.Has("capacity") ||
      ctx.args.GetOr("format", "table") != "table") {
    return Usage(absl::InvalidArgumentError(
        "--backend=uffd runs demand paging (--schemes=none) with unlimited device memory and "
        "prints a table; drop --schemes, --capacity and --format"));
  }
  snurhac::RealClusterRequest request;
  request.verify = ctx.args.Has("verify");
  if (!absl::SimpleAtoi(ctx.args.GetOr("threads", "2"), &request.threads) ||
      request.threads < 1 || request.threads > 64 ||
      !absl::SimpleAtoi(ctx.args.GetOr("watchdog-s", "60"), &request.watchdog_s) ||
      request.watchdog_s < 1) {
    return Usage(absl::InvalidArgumentError(
        "--threads takes 1 to 64 worker threads per device, --watchdog-s a whole number of "
        "seconds >= 1"));
  }
  std::vector<int> device_counts;
  for (absl::string_view item : absl::StrSplit(ctx.args.GetOr("devices", "1,2,4"), ',')) {
    int count = 0;
    if (!absl::SimpleAtoi(item, &count) || count < 1 || count > 4) {
      return Usage(absl::InvalidArgumentError(absl::StrFormat(
          "--backend=uffd runs 1 to 4 device processes, such as --devices=1,2,4; not '%s'",
          item)));
    }
    device_counts.push_back(count);
  }
  std::vector<std::string> apps = ctx.args.GetAll("app");
  if (apps.empty()) apps = {"gemm", "hotspot"};
  const std::string scale = ctx.args.GetOr("scale", "0.002");
  snurhac::ClusterConfig config;
  config.device = device;
  auto mib = [](uint64_t bytes) { return absl::StrFormat("%.2f", bytes / 1048576.0); };
  std::vector<std::vector<std::string>> rows = {
      {"program", "devices", "run", "time ms", "faults", "faulted pages", "lock waits",
       "host MiB", "zero-filled MiB", "peer MiB", "upgrades", "downgrades", "end unmaps",
       "write-back MiB", "verify"}};
  auto add_row = [&](const std::string& app, int count, const std::string& run, double ms,
                     const snurhac::ClusterDeviceStats& t, const std::string& verify) {
    rows.push_back({app, absl::StrCat(count), run, absl::StrFormat("%.1f", ms),
                    absl::StrCat(t.faults), absl::StrCat(t.faulted_pages),
                    absl::StrCat(t.lock_waits), mib(t.host_fetch_bytes),
                    mib(t.zero_filled_bytes), mib(t.peer_fetch_bytes), absl::StrCat(t.upgrades),
                    absl::StrCat(t.downgrades), absl::StrCat(t.kernel_end_unmapped_pages),
                    mib(t.write_back_bytes), verify});
  };
  bool mismatched = false;
  for (std::string app : apps) {
    if (!absl::StrContains(app, "scale=")) {
      absl::StrAppend(&app, absl::StrContains(app, ':') ? "," : ":", "scale=", scale);
    }
    absl::StatusOr<std::shared_ptr<const GridProgram>> program =
        MakeGridProgram(app, device.compute);
    if (!program.ok()) return Usage(program.status());
    for (int count : device_counts) {
      request.devices = count;
      absl::StatusOr<snurhac::RealClusterResult> real = (*runner)(**program, request);
      if (!real.ok()) return RunFailed(real.status());
      std::string verify = "off";
      if (request.verify) {
        const uint64_t bad =
            real->read_mismatches + real->final_mismatches + real->audit_mismatches;
        verify = bad == 0 ? absl::StrFormat("ok (%d words)", real->checked_words)
                          : absl::StrFormat("%d MISMATCHES: %s", bad, real->first_mismatch);
        mismatched = mismatched || bad != 0;
      }
      add_row(app, count, backend, real->wall_ns / 1e6, real->total, verify);
      absl::StatusOr<ClusterCaseResult> sim =
          RunClusterCase(ClusterCase{*program, count, SnurhacScheme::kNone,
                                     "snurhac-correlation", config});
      if (!sim.ok()) return RunFailed(sim.status());
      add_row(app, count, "sim", sim->result.time_ns / 1e6, sim->result.total, "");
    }
  }
  ctx.out << RenderTextTable(rows, 3);
  if (mismatched) {
    return Failure{kExitFailure, "the uffd cluster's memory differs from the sequential run"};
  }
  return std::nullopt;
}

// `umlab snurhac`: SnuRHAC's cluster runs, a row per program, scheme and
// device count.
std::optional<Failure> SnurhacCommand(const Context& ctx) {
  absl::StatusOr<DeviceConfig> device = ResolveDevice(ctx.args, kDefaultDevice);
  if (!device.ok()) return Usage(device.status());
  if (const std::string backend = ctx.args.GetOr("backend", "sim"); backend != "sim") {
    return SnurhacRealCommand(ctx, backend, *device);
  }
  if (ctx.args.Has("verify") || ctx.args.Has("threads") || ctx.args.Has("watchdog-s")) {
    return Usage(absl::InvalidArgumentError(
        "--verify, --threads and --watchdog-s are for --backend=uffd"));
  }
  absl::StatusOr<const OutputFormat<std::vector<ClusterCaseResult>>*> format =
      FindFormat(ClusterFormats(), ctx.args.GetOr("format", ClusterFormats().front().name));
  if (!format.ok()) return Usage(format.status());
  snurhac::ClusterConfig config;
  config.device = *device;
  config.check_invariants = ctx.args.Has("check-invariants");
  absl::StatusOr<uint64_t> capacity = ParseByteSize(ctx.args.GetOr("capacity", "32GiB"));
  if (!capacity.ok() || *capacity < kBlockSize) {
    return Usage(absl::InvalidArgumentError("--capacity takes a size of at least 2MiB, such as 32GiB"));
  }
  config.capacity_frames = *capacity / kBlockSize;
  double gbps = 0, latency_us = 0;
  if (!absl::SimpleAtoi(ctx.args.GetOr("devices-per-node", "4"), &config.devices_per_node) ||
      config.devices_per_node < 1 ||
      !absl::SimpleAtod(ctx.args.GetOr("network-gbps", "12.5"), &gbps) || gbps <= 0 ||
      !absl::SimpleAtod(ctx.args.GetOr("network-latency-us", "1"), &latency_us) ||
      latency_us < 0) {
    return Usage(absl::InvalidArgumentError(
        "--devices-per-node takes a whole number >= 1, --network-gbps a rate > 0 in GB/s, "
        "--network-latency-us a time >= 0"));
  }
  config.network.bytes_per_second = gbps * 1e9;
  config.network.latency_ns = static_cast<Nanos>(latency_us * 1000);
  std::vector<int> device_counts;
  for (absl::string_view item : absl::StrSplit(ctx.args.GetOr("devices", "1,2,4,8,16,32"), ',')) {
    int count = 0;
    if (!absl::SimpleAtoi(item, &count) || count < 1 || count > snurhac::kMaxClusterDevices) {
      return Usage(absl::InvalidArgumentError(absl::StrFormat(
          "--devices takes counts from 1 to %d, such as 1,2,4; not '%s'",
          snurhac::kMaxClusterDevices, item)));
    }
    device_counts.push_back(count);
  }
  std::vector<SnurhacScheme> schemes;
  for (absl::string_view item : absl::StrSplit(ctx.args.GetOr("schemes", "none,sp,sp-dp"), ',')) {
    absl::StatusOr<SnurhacScheme> scheme = ParseSnurhacScheme(std::string(item));
    if (!scheme.ok()) return Usage(scheme.status());
    schemes.push_back(*scheme);
  }
  absl::StatusOr<int> jobs = ParseJobs(ctx.args.GetOr("jobs", "0"));
  if (!jobs.ok()) return Usage(jobs.status());
  std::vector<std::string> apps = ctx.args.GetAll("app");
  if (apps.empty()) {
    for (const GridWorkloadRegistry::Entry* entry : GridWorkloads().Entries()) {
      apps.push_back(entry->name);
    }
  }
  const std::optional<std::string> scale = ctx.args.Get("scale");
  const std::string correlation = ctx.args.GetOr("correlation", "snurhac-correlation");
  if (absl::StatusOr<std::unique_ptr<Policy>> probe = Policies().Create(correlation); !probe.ok()) {
    return Usage(probe.status());
  }
  std::vector<ClusterCase> cases;
  for (std::string app : apps) {
    if (scale.has_value()) absl::StrAppend(&app, absl::StrContains(app, ':') ? "," : ":", "scale=", *scale);
    absl::StatusOr<std::shared_ptr<const GridProgram>> program = MakeGridProgram(app, device->compute);
    if (!program.ok()) return Usage(program.status());
    for (SnurhacScheme scheme : schemes) {
      for (int count : device_counts) {
        cases.push_back(ClusterCase{*program, count, scheme, correlation, config});
      }
    }
  }
  std::vector<ClusterCaseResult> results;
  for (absl::StatusOr<ClusterCaseResult>& result : RunClusterCases(cases, *jobs)) {
    if (!result.ok()) return RunFailed(result.status());
    results.push_back(*std::move(result));
  }
  ctx.out << (*format)->render(results);
  return std::nullopt;
}

// `sweep` and `merge`: one positional argument, an outcome to pass on.
Handler SweepHandler(const std::string& usage,
                     std::function<SweepOutcome(const Context&, const std::string&)> body) {
  return [usage, body](const Context& ctx) -> std::optional<Failure> {
    if (ctx.args.positional().size() != 1) return Usage(absl::InvalidArgumentError(usage));
    const SweepOutcome outcome = body(ctx, ctx.args.positional()[0]);
    if (outcome.exit_code == kExitOk) return std::nullopt;
    return Failure{outcome.exit_code, outcome.message};
  };
}

const std::vector<Command>& Commands() {
  static const std::vector<Command>* commands = new std::vector<Command>{
      {"run", "[options]", "run one policy on a workload and report its metrics",
       "Runs the program on the chosen backend with one policy.",
       Join(ProgramOptions(), MachineOptions(), RunFormatOption(),
            std::vector<OptionSpec>{{"policy", "SPEC", "policy, optionally with parameters "
                                                       "(deepum:rows=1024)", "demand"},
                                    SeriesOption(), TimelineOption()}),
       RunCommand},
      {"record", "--output=FILE.umt [options]",
       "run like 'run' and write a .umt trace of the program and what was observed",
       "The trace holds the program (allocations, kernels, accesses) and the faults, "
       "migrations and evictions the backend saw. 'umlab replay' runs it again.",
       Join(ProgramOptions(), MachineOptions(), RunFormatOption(),
            std::vector<OptionSpec>{
                {"policy", "SPEC", "policy to run while recording", "demand"},
                {"output", "FILE", "the trace to write (written to FILE.tmp, then renamed)"},
                SeriesOption(), TimelineOption()}),
       RecordCommand},
      {"replay", "FILE.umt [options]", "run a policy on the program a trace recorded",
       "The device defaults to the one the trace was recorded for.",
       Join(MachineOptions(), RunFormatOption(),
            std::vector<OptionSpec>{{"policy", "SPEC", "policy to run", "demand"},
                                    SeriesOption(), TimelineOption()}),
       ReplayCommand},
      {"compare", "[options]", "A/B compare policies on one workload or trace",
       "Runs every policy on the same program, device and capacity, and prints one row "
       "each. The first policy is the baseline for the speedup column. Without --policies, a "
       "policy that cannot run at this capacity (flashneuron keeps every weight on the device) "
       "is left out with a one-line note on stderr; a policy you name that cannot run, or any "
       "run that fails, fails the command (exit 1) after the rows of the runs that finished.",
       Join(ProgramOptions(), MachineOptions(), RunFormatOption(),
            std::vector<OptionSpec>{
                {"policies", "LIST",
                 "comma-separated policy specs, e.g. demand,deepum:rows=1024,assoc=4",
                 "demand, every other policy, ideal", true},
                {"trace", "FILE", "compare on a recorded trace instead of a workload"},
                JobsOption(), SeriesOption(), ReportOption()}),
       CompareCommand},
      {"report", "FILE.json... --output=FILE.html",
       "draw runs' JSON as one self-contained HTML page of charts",
       "Reads the JSON that run, replay or compare printed with --format=json (add --series "
       "for the charts over time) and writes one HTML file with inline SVG and no script or "
       "network access: a comparison table with speedups, time and stall per iteration, faults "
       "per kernel, device memory over time, link use per direction, and prefetch usefulness "
       "and lateness. --trace adds a .umt trace's faults and link traffic by issue time "
       "(docs/report.md).",
       ReportCommandOptions(),
       [](const Context& ctx) {
         return WriteVisual(ctx, "umlab report takes JSON files and --output=FILE.html", false,
                            [&](const std::vector<std::string>& inputs, const std::string& output) {
                              return ReportFromFiles(inputs, ctx.args.GetAll("trace"), output);
                            });
       }},
      {"timeline", "FILE.umt --output=FILE.json",
       "convert a trace to Chrome trace-event JSON (Perfetto, chrome://tracing)",
       "A .umt trace holds the times of faults and of transfers as issued, not of kernels or "
       "fault batches, and those tracks stay empty; for every track (kernels, fault batches, "
       "transfers on each link direction, counters) run with --timeline=FILE instead "
       "(docs/report.md).",
       TimelineCommandOptions(),
       [](const Context& ctx) {
         return WriteVisual(ctx, "umlab timeline takes one trace: umlab timeline FILE.umt "
                                 "--output=FILE.json",
                            true,
                            [](const std::vector<std::string>& inputs, const std::string& output) {
                              return TimelineFromTraceFile(inputs.front(), output);
                            });
       }},
      {"inspect", "FILE.umt [--format=FMT]",
       "check a trace end to end and summarise it", "Reads every chunk, so corruption "
       "anywhere is reported (exit 1).",
       std::vector<OptionSpec>{FormatOption(TraceSummaryFormats())},
       InspectCommand},
      {"import-g10", "--model=NAME --batch=B [--dir=DIR] --output=FILE.umt | --list [--dir=DIR]",
       "write a G10 model's training iteration (graph + A100 kernel times) as a .umt trace",
       "Reads G10's frontend/Nets/NAME.txt and results/NAME/cudnnB*.txt; tensor sizes, "
       "kernel order and times follow G10 (see docs/workloads.md).",
       ImportG10Options(),
       [](const Context& ctx) -> std::optional<Failure> {
         if (auto failure = ImportG10(ctx.args, ctx.out)) {
           return Failure{failure->code, failure->message};
         }
         return std::nullopt;
       }},
      {"torch", "[options] -- SCRIPT [ARGS...]",
       "run a PyTorch training script on managed memory, with umlab's policies acting on it",
       "Starts python3 -m umlab_torch from this build (needs a GPU, PyTorch, and a build "
       "with a CUDA toolkit); every option passes through to it. Each capacity runs the "
       "script once per policy in a child process: 'driver' is the UVM driver alone, any "
       "other name a umlab policy whose engine runs beside the training (docs/torch.md).",
       std::vector<OptionSpec>{
           {"capacity", "LIST", "fractions of the footprint in (0, 1] or sizes (6GiB)", "1.0"},
           {"policies", "LIST", "driver, or umlab policy names such as deepum", "driver"},
           {"gpu", "N", "CUDA device ordinal", "0"},
           {"output", "FILE", "the detailed report (faults and traffic by cause, per iteration)"},
           {"json", "FILE", "the runs as the JSON contract, for umlab report"}},
       [](const Context&) -> std::optional<Failure> { return std::nullopt; }},
      {"policies", "", "list the policies with their parameters and defaults", "",
       {}, PoliciesCommand},
      {"workloads", "[--describe NAME [--workload-arg K=V]]",
       "list the workloads, or describe one's footprint", "",
       std::vector<OptionSpec>{
           {"describe", "NAME", "print the footprint and shape of one workload"},
           {"workload-arg", "K=V", "workload parameter, with --describe", "", true},
           {"device", "PRESET", "device preset, for compute times", kDefaultDevice},
           {"device-param", "K=V", "override a preset value", "", true}},
       WorkloadsCommand},
      {"devices", "", "list the device presets and their parameters", "", {},
       DevicesCommand},
      {"backends", "", "list the backends in this build and their parameters", "", {},
       BackendsCommand},
      {"regress", "SUITE.json [--update]",
       "run a policy regression suite and compare with its stored bounds",
       "Each case runs a workload under a policy and checks bounds such as faults <= X "
       "and time <= Y, each with a tolerance (see cli/regress.h for the format). Prints "
       "pass/fail with deltas; exits 1 on any regression. --update rewrites the bounds "
       "to the measured values.",
       std::vector<OptionSpec>{{"update", "", "rewrite every bound to the measured value"},
                               JobsOption(), QuietOption()},
       [](const Context& ctx) -> std::optional<Failure> {
         if (ctx.args.positional().size() != 1) {
           return Usage(absl::InvalidArgumentError(
               "umlab regress takes one suite: umlab regress SUITE.json [--update]"));
         }
         absl::StatusOr<int> jobs = ParseJobs(ctx.args.GetOr("jobs", "0"));
         if (!jobs.ok()) return Usage(jobs.status());
         ProgressLine progress(ctx.err, ctx.Progress());
         const RegressOutcome outcome = RunRegressSuite(
             ctx.args.positional()[0], ctx.args.Has("update"), *jobs, ctx.out, &progress);
         if (outcome.exit_code == kExitOk) return std::nullopt;
         return Failure{outcome.exit_code, outcome.message};
       }},
      {"sweep", "GRID.json|GRID.yaml [--results=DIR] [--run=local[:N]]",
       "expand a grid of runs into jobs for GNU parallel and Slurm job arrays",
       "The grid's axes and fixed options (docs/sweeps.md; JSON, or YAML for a .yaml or "
       ".yml file) expand into one 'umlab run' "
       "(or 'umlab replay', for a trace) per case, each writing its JSON to DIR/cases under a name made from its "
       "arguments. Writes DIR/jobs (for GNU parallel), DIR/slurm/ (job-array scripts with "
       "time and memory estimated per case, and submit.sh) and DIR/sweep.json. Every case "
       "is checked before anything is written. A case whose result exists is skipped, so "
       "a rerun resumes. umlab schedules nothing itself; --run=local hands the pending "
       "cases to GNU parallel.",
       std::vector<OptionSpec>{
           {"results", "DIR", "folder of the jobs, scripts and results",
            "the grid's path, its extension replaced by .sweep"},
           {"run", "local[:N]",
            "run the pending cases here through GNU parallel, N at once (default: one per "
            "core); exit 1 if any fails"},
           {"umlab", "PATH", "the umlab binary the jobs run", "this one"}},
       SweepHandler("umlab sweep takes one grid: umlab sweep GRID.json",
                    [](const Context& ctx, const std::string& grid) {
                      return RunSweep({.grid_path = grid,
                                       .results_dir = ctx.args.GetOr("results", ""),
                                       .run = ctx.args.GetOr("run", ""),
                                       .umlab = ctx.args.GetOr("umlab", "")},
                                      ctx.out);
                    })},
      {"snurhac", "[--app=NAME[:K=V]]... [options]",
       "run grid programs on 1 to 32 devices under SnuRHAC (DeepUM thesis ch. 6)",
       "Splits each kernel's grid over the devices, keeps their memory coherent with "
       "SnuRHAC's directory protocol and prefetches by the chosen schemes (none, sp: static "
       "prefetching from MAPA's affine ranges, dp: dynamic prefetching, adjacent pages and "
       "page-level correlation, sp-dp: both), on the cluster sim (docs/snurhac.md). Prints a "
       "row per program, scheme and device count. With --backend=uffd, runs plain SnuRHAC on "
       "one process per device instead and prints each run beside the sim's.",
       std::vector<OptionSpec>{
           {"app", "NAME[:K=V]", "grid program, with parameters (gemm:scale=0.1); default: all of "
            "them", "", true},
           {"scale", "X", "fraction of each program's thesis size (Table 7.10), in (0, 1]", ""},
           {"devices", "LIST", "device counts, 1 to 32", "1,2,4,8,16,32"},
           {"schemes", "LIST", "none, sp, dp, sp-dp", "none,sp,sp-dp"},
           {"correlation", "SPEC", "dynamic prefetching's correlation policy",
            "snurhac-correlation"},
           {"device", "PRESET", "every device's preset (Table 7.9: V100 on PCIe 3)",
            kDefaultDevice},
           {"device-param", "K=V", "override a preset value", "", true},
           {"capacity", "SIZE", "each device's memory (Table 7.9: 32 GB)", "32GiB"},
           {"devices-per-node", "N", "devices sharing a node's memory and network port "
            "(Table 7.9: 4)", "4"},
           {"network-gbps", "X", "each node's network port, GB/s per direction (InfiniBand "
            "EDR: 12.5)", "12.5"},
           {"network-latency-us", "X", "one network message or transfer's latency (an "
            "assumption)", "1"},
           {"check-invariants", "", "check the coherence invariants after every step (slow)", ""},
           {"backend", "NAME", "sim (virtual time), or uffd: one process per device with its "
            "own userfaultfd, over Unix sockets, next to the sim's counters (1 to 4 devices, "
            "scheme none; --scale defaults to 0.002 and --app to gemm and hotspot there)", "sim"},
           {"verify", "", "uffd: check every read and the final memory against the "
            "sequential run, and every page table against the directory at kernel ends "
            "(exit 1 on a mismatch)", ""},
           {"threads", "N", "uffd: worker threads per device", "2"},
           {"watchdog-s", "S", "uffd: fail when no device reports for this long", "60"},
           FormatOption(ClusterFormats()),
           JobsOption()},
       SnurhacCommand},
      {"merge", "DIR", "merge a sweep's results into DIR/merged.json and DIR/merged.csv",
       "merged.json is the compare contract with each case's name and grid coordinates, "
       "plus the failed cases (with their errors) and the missing ones; merged.csv has a "
       "row per case. Exits 1 if any case failed or is missing (both files are written "
       "anyway).",
       {},
       SweepHandler("umlab merge takes one sweep folder: umlab merge DIR",
                    [](const Context& ctx, const std::string& dir) {
                      return MergeSweep(dir, ctx.out);
                    })},
  };
  return *commands;
}

std::string TopLevelHelp() {
  std::string out =
      "umlab: a research framework for GPU unified-memory management\n\n"
      "usage: umlab COMMAND [options]    (umlab COMMAND --help for its options)\n\n"
      "commands:\n";
  for (const Command& command : Commands()) {
    out += absl::StrFormat("  %-10s %s\n", command.name, command.summary);
  }
  out +=
      "\nexit codes: 0 success, 1 a run or check failed, 2 a usage error\n"
      "example: umlab compare --workload=mlp --capacity=0.5\n";
  return out;
}

std::string CommandHelp(const Command& command) {
  std::string out = absl::StrFormat("usage: umlab %s %s\n\n%s\n", command.name, command.usage,
                                    command.summary);
  if (!command.details.empty()) out += "\n" + command.details + "\n";
  if (!command.options.empty()) out += "\noptions:\n" + FormatOptions(command.options);
  return out;
}

}  // namespace

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
         int err_columns) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2 && args[0] == "help") {
      for (const Command& command : Commands()) {
        if (command.name == args[1]) {
          out << CommandHelp(command);
          return kExitOk;
        }
      }
      err << "umlab: unknown command '" << args[1] << "'; see 'umlab --help'\n";
      return kExitUsage;
    }
    (args.empty() ? err : out) << TopLevelHelp();
    return args.empty() ? kExitUsage : kExitOk;
  }
  const Command* command = nullptr;
  for (const Command& candidate : Commands()) {
    if (candidate.name == args[0]) command = &candidate;
  }
  if (command == nullptr) {
    err << "umlab: unknown command '" << args[0] << "'; see 'umlab --help'\n";
    return kExitUsage;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // Its options, and the script's after "--", are the launcher's to read.
  if (command->name == "torch" && !(rest.size() == 1 && (rest[0] == "--help" || rest[0] == "-h"))) {
    return RunTorchLauncher(rest, err);
  }
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    out << CommandHelp(*command);
    return kExitOk;
  }
  std::vector<OptionSpec> specs = command->options;
  absl::StatusOr<Arguments> parsed =
      ParseArguments(rest, specs, absl::StrCat("umlab ", command->name));
  if (!parsed.ok()) {
    err << "umlab " << command->name << ": " << parsed.status().message() << "\n";
    return kExitUsage;
  }
  const bool takes_positional =
      command->name == "replay" || command->name == "inspect" || command->name == "regress" ||
      command->name == "sweep" || command->name == "merge" || command->name == "report" ||
      command->name == "timeline";
  if (!takes_positional && !parsed->positional().empty()) {
    err << "umlab " << command->name << ": unexpected argument '" << parsed->positional()[0]
        << "'; see 'umlab " << command->name << " --help'\n";
    return kExitUsage;
  }
  std::optional<Failure> failure = command->handler(Context{*parsed, out, err, err_columns});
  if (failure.has_value()) {
    err << "umlab " << command->name << ": " << failure->message << "\n";
    return failure->code;
  }
  return kExitOk;
}

}  // namespace umlab::cli
