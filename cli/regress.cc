#include "cli/regress.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/file_text.h"
#include "cli/exit_codes.h"
#include "cli/json_contract.h"
#include "cli/json_text.h"
#include "cli/runner/experiment.h"
#include "cli/report.h"
#include "cli/text_table.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

// Json (cli/json_text.h) is ordered_json: it keeps the suite's key order, so
// --update rewrites the file with the smallest possible diff.

constexpr double kDefaultTolerance = 0.02;

// Every metric a bound may name, once: its name, how to measure it, and
// whether --update bounds it in a case that states no bounds. Rows print in
// this order.
struct MetricDef {
  const char* name;
  double (*measure)(const RunResult& run);
  bool by_default;
};

double Count(uint64_t value) { return static_cast<double>(value); }

const std::vector<MetricDef>& Metrics() {
  static const auto* metrics = new std::vector<MetricDef>{
      {"faults", [](const RunResult& r) { return Count(r.stats.faults); }, true},
      {"steady_faults_per_iteration",
       [](const RunResult& r) { return SteadyStateMean(r.stats, &IterationStats::faults); },
       true},
      {"time_ns", [](const RunResult& r) { return Count(r.stats.time_ns); }, true},
      {"steady_time_ns_per_iteration",
       [](const RunResult& r) { return SteadyStateMeanTime(r.stats); }, true},
      {"stall_ns", [](const RunResult& r) { return Count(r.stats.stall_ns); }, false},
      {"h2d_bytes", [](const RunResult& r) { return Count(r.stats.h2d_bytes); }, false},
      {"d2h_bytes", [](const RunResult& r) { return Count(r.stats.d2h_bytes); }, false},
      {"policy_table_bytes", [](const RunResult& r) { return Count(r.policy_table_bytes); },
       false},
  };
  return *metrics;
}

const MetricDef* FindMetric(const std::string& name) {
  for (const MetricDef& metric : Metrics()) {
    if (metric.name == name) return &metric;
  }
  return nullptr;
}

struct Bound {
  std::string metric;
  std::optional<double> max;  // none yet: only --update can fill it
  double tolerance = kDefaultTolerance;
};

struct Case {
  std::string name;
  std::string workload;
  std::vector<std::string> workload_args;
  std::string device;
  std::string capacity;
  std::string policy;
  std::string backend;
  std::vector<Bound> bounds;
  Json* json = nullptr;  // the case in the parsed suite, for --update
};

absl::Status SuiteError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("suite %s: %s", path, what));
}

// A string member, or `fallback` when absent. Numbers are accepted where a
// person would write one (capacity: 0.5).
absl::StatusOr<std::string> StringMember(const Json& object, const char* key,
                                         const std::string& fallback, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  return absl::InvalidArgumentError(absl::StrFormat("%s: \"%s\" must be a string", where, key));
}

absl::StatusOr<double> NumberMember(const Json& object, const char* key, double fallback,
                                    const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: \"%s\" must be a number", where, key));
  }
  return it->get<double>();
}

absl::StatusOr<std::vector<Case>> ParseSuite(const std::string& path, Json& suite) {
  if (!suite.is_object() || !suite.contains("cases") || !suite["cases"].is_array() ||
      suite["cases"].empty()) {
    return SuiteError(path, "expected an object with a non-empty \"cases\" array");
  }
  absl::StatusOr<double> suite_tolerance =
      NumberMember(suite, "tolerance", kDefaultTolerance, absl::StrCat("suite ", path));
  if (!suite_tolerance.ok()) return suite_tolerance.status();
  static const Json kEmpty = Json::object();
  const Json& defaults = suite.contains("defaults") ? suite["defaults"] : kEmpty;
  if (!defaults.is_object()) return SuiteError(path, "\"defaults\" must be an object");

  std::vector<Case> cases;
  int index = 0;
  for (Json& entry : suite["cases"]) {
    const std::string where = absl::StrFormat("suite %s, case %d", path, index++);
    if (!entry.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
    Case c;
    c.json = &entry;
    // Members fall back to the suite's defaults, then to the CLI's.
    auto member = [&](const char* key, const std::string& fallback) {
      absl::StatusOr<std::string> from_defaults = StringMember(defaults, key, fallback, where);
      if (!from_defaults.ok()) return from_defaults;
      return StringMember(entry, key, *from_defaults, where);
    };
    struct Field {
      const char* key;
      std::string* value;
      const char* fallback;
    };
    for (const Field& field : {Field{"workload", &c.workload, ""}, Field{"policy", &c.policy, ""},
                               Field{"device", &c.device, "v100-pcie3"},
                               Field{"capacity", &c.capacity, "0.5"},
                               Field{"backend", &c.backend, "sim"}}) {
      absl::StatusOr<std::string> value = member(field.key, field.fallback);
      if (!value.ok()) return value.status();
      *field.value = *value;
    }
    if (c.workload.empty() || c.policy.empty()) {
      return absl::InvalidArgumentError(where + ": needs \"workload\" and \"policy\"");
    }
    if (auto args = entry.find("workload_args"); args != entry.end()) {
      if (args->is_string()) {
        c.workload_args.push_back(args->get<std::string>());
      } else if (args->is_array()) {
        for (const Json& arg : *args) {
          if (!arg.is_string()) {
            return absl::InvalidArgumentError(where + ": \"workload_args\" holds strings (k=v)");
          }
          c.workload_args.push_back(arg.get<std::string>());
        }
      } else {
        return absl::InvalidArgumentError(where + ": \"workload_args\" must be a list of k=v");
      }
    }
    absl::StatusOr<std::string> name = StringMember(
        entry, "name", absl::StrCat(c.workload, "/", c.policy), where);
    if (!name.ok()) return name.status();
    c.name = *name;

    if (auto expect = entry.find("expect"); expect != entry.end()) {
      if (!expect->is_object()) {
        return absl::InvalidArgumentError(where + ": \"expect\" must be an object");
      }
      for (auto it = expect->begin(); it != expect->end(); ++it) {
        const std::string metric = it.key();
        if (FindMetric(metric) == nullptr) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: unknown metric \"%s\"; known: %s", where, metric,
              absl::StrJoin(RegressMetrics(), ", ")));
        }
        if (!it->is_object()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: \"%s\" must be an object like {\"max\": 100}", where, metric));
        }
        Bound bound;
        bound.metric = metric;
        if (it->contains("max")) {
          absl::StatusOr<double> max = NumberMember(*it, "max", 0, where);
          if (!max.ok()) return max.status();
          bound.max = *max;
        }
        absl::StatusOr<double> tolerance =
            NumberMember(*it, "tolerance", *suite_tolerance, where);
        if (!tolerance.ok()) return tolerance.status();
        if (*tolerance < 0) {
          return absl::InvalidArgumentError(where + ": a tolerance cannot be negative");
        }
        bound.tolerance = *tolerance;
        c.bounds.push_back(bound);
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

// Parses `text` into `suite` (which the cases point into) and validates it.
absl::StatusOr<std::vector<Case>> ParseSuiteText(const std::string& path,
                                                 const std::string& text, Json& suite) {
  // No exceptions cross into our code: a parse error yields a discarded value.
  suite = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (suite.is_discarded()) return SuiteError(path, "not valid JSON");
  if (absl::Status version = CheckJsonContractVersion(suite, absl::StrCat("suite ", path));
      !version.ok()) {
    return version;
  }
  return ParseSuite(path, suite);
}

// Bounds name known metrics only (ParseSuite checks).
double Metric(const RunResult& run, const std::string& metric) {
  return FindMetric(metric)->measure(run);
}

std::string Number(double value) {
  return value == static_cast<double>(static_cast<int64_t>(value))
             ? absl::StrFormat("%d", static_cast<int64_t>(value))
             : absl::StrFormat("%.1f", value);
}

// The value --update stores: whole numbers stay whole in the file.
Json Stored(double value) {
  if (value == static_cast<double>(static_cast<int64_t>(value))) {
    return Json(static_cast<int64_t>(value));
  }
  return Json(std::round(value * 10) / 10);
}

}  // namespace

const std::vector<std::string>& RegressMetrics() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>;
    for (const MetricDef& metric : Metrics()) out->push_back(metric.name);
    return out;
  }();
  return *names;
}

absl::StatusOr<int> CheckRegressSuite(const std::string& path, const std::string& text) {
  Json suite;
  absl::StatusOr<std::vector<Case>> cases = ParseSuiteText(path, text, suite);
  if (!cases.ok()) return cases.status();
  return static_cast<int>(cases->size());
}

RegressOutcome RunRegressSuite(const std::string& path, bool update, int jobs,
                               std::ostream& out, ProgressLine* progress) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {kExitUsage, absl::StrFormat("cannot read suite %s", path)};
  std::stringstream text;
  text << file.rdbuf();
  Json suite;
  absl::StatusOr<std::vector<Case>> cases = ParseSuiteText(path, text.str(), suite);
  if (!cases.ok()) return {kExitUsage, std::string(cases.status().message())};

  // Validate every case before running any, so a typo fails in a second.
  std::map<std::string, std::unique_ptr<ProgramInput>> programs;
  std::vector<std::pair<DeviceConfig, ProgramInput*>> setups;
  for (const Case& c : *cases) {
    absl::StatusOr<DeviceConfig> device = DevicePreset(c.device);
    if (!device.ok()) {
      return {kExitUsage, absl::StrFormat("case %s: %s", c.name, device.status().message())};
    }
    const std::string key =
        absl::StrCat(c.workload, "|", absl::StrJoin(c.workload_args, ","), "|", c.device);
    std::unique_ptr<ProgramInput>& program = programs[key];
    if (program == nullptr) {
      absl::StatusOr<ProgramInput> input =
          ProgramInput::FromWorkload(c.workload, c.workload_args, device->compute);
      if (!input.ok()) {
        return {kExitUsage, absl::StrFormat("case %s: %s", c.name, input.status().message())};
      }
      program = std::make_unique<ProgramInput>(std::move(*input));
    }
    setups.emplace_back(*device, program.get());
  }

  std::vector<std::vector<std::string>> rows = {
      {"case", "metric", "bound", "measured", "delta", "tolerance", "result"}};
  std::vector<std::string> regressions;
  int bounds_checked = 0, bounds_passed = 0, runs_failed = 0;
  std::vector<RunRequest> requests;
  for (size_t i = 0; i < cases->size(); ++i) {
    const Case& c = (*cases)[i];
    RunRequest& request = requests.emplace_back();
    request.program = setups[i].second;
    request.device = setups[i].first;
    request.capacity = c.capacity;
    request.policy = c.policy;
    request.backend = c.backend;
  }
  std::vector<absl::StatusOr<RunResult>> runs = ExecuteRuns(std::move(requests), jobs, progress);
  if (progress != nullptr) progress->Finish();
  for (size_t i = 0; i < cases->size(); ++i) {
    Case& c = (*cases)[i];
    absl::StatusOr<RunResult>& run = runs[i];
    if (!run.ok()) {
      ++runs_failed;
      rows.push_back({c.name, "(run)", "-", "-", "-", "-", "ERROR"});
      regressions.push_back(absl::StrFormat("%s: the run failed: %s", c.name,
                                            run.status().message()));
      continue;
    }
    if (update) {
      if (c.bounds.empty()) {
        for (const MetricDef& metric : Metrics()) {
          if (metric.by_default) c.bounds.push_back(Bound{metric.name});
        }
      }
      Json& expect = (*c.json)["expect"];
      for (Bound& bound : c.bounds) {
        const double measured = Metric(*run, bound.metric);
        const std::string before = bound.max.has_value() ? Number(*bound.max) : "-";
        expect[bound.metric]["max"] = Stored(measured);
        rows.push_back({c.name, bound.metric, before, Number(measured), "-",
                        absl::StrFormat("%g%%", 100 * bound.tolerance), "UPDATED"});
      }
      continue;
    }
    if (c.bounds.empty()) {
      rows.push_back({c.name, "(none)", "-", "-", "-", "-", "NO BOUNDS"});
      continue;
    }
    for (const Bound& bound : c.bounds) {
      const double measured = Metric(*run, bound.metric);
      ++bounds_checked;
      if (!bound.max.has_value()) {
        rows.push_back({c.name, bound.metric, "-", Number(measured), "-", "-", "NO MAX"});
        regressions.push_back(absl::StrFormat(
            "%s: %s has no \"max\"; run with --update to record one", c.name, bound.metric));
        continue;
      }
      const double max = *bound.max;
      const double delta = max == 0 ? (measured == 0 ? 0 : 1) : (measured - max) / max;
      const bool pass = measured <= max * (1 + bound.tolerance);
      if (pass) ++bounds_passed;
      rows.push_back({c.name, bound.metric, Number(max), Number(measured),
                      absl::StrFormat("%+.1f%%", 100 * delta),
                      absl::StrFormat("%g%%", 100 * bound.tolerance), pass ? "pass" : "FAIL"});
      if (!pass) {
        regressions.push_back(absl::StrFormat(
            "%s: %s = %s, above its bound %s by %+.1f%% (tolerance %g%%)", c.name,
            bound.metric, Number(measured), Number(max), 100 * delta, 100 * bound.tolerance));
      }
    }
  }

  out << absl::StrFormat("suite %s: %d cases\n\n", path, cases->size())
      << RenderTextTable(rows, /*left_columns=*/2);
  if (update) {
    if (runs_failed > 0) {
      return {kExitFailure, absl::StrFormat("%d case(s) failed to run; %s not rewritten:\n  %s",
                                            runs_failed, path, absl::StrJoin(regressions, "\n  "))};
    }
    // The rewritten suite is written by this umlab: it carries this contract
    // version, first, whatever (older) version it had.
    Json versioned = VersionedJsonObject();
    for (const auto& [key, value] : suite.items()) {
      if (key != kJsonContractKey) versioned[key] = value;
    }
    const std::string rewritten = JsonText(versioned, /*indent=*/2) + "\n";
    if (absl::Status status = WriteFileAtomically(path, rewritten); !status.ok()) {
      return {kExitFailure, std::string(status.message())};
    }
    out << absl::StrFormat("\nexpectations of %d cases rewritten in %s\n", cases->size(), path);
    return {kExitOk, ""};
  }
  out << absl::StrFormat("\n%d of %d bounds passed\n", bounds_passed, bounds_checked);
  if (regressions.empty()) return {kExitOk, ""};
  out << "\nregressions:\n";
  for (const std::string& line : regressions) out << "  " << line << "\n";
  return {kExitFailure, absl::StrFormat("%d regression(s) in %s", regressions.size(), path)};
}

}  // namespace umlab::cli
