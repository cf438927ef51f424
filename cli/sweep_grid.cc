#include "cli/sweep_grid.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/json_text.h"

namespace umlab::cli {
namespace {

// The options a grid may set, in the order they appear on a case's command
// line and in its name.
enum class Kind {
  kWorkload,
  kTrace,
  kWorkloadArg,
  kDevice,
  kDeviceParam,
  kBackend,
  kPolicy,
  kPolicyParam,
  kCapacity,
  kReplay,
};

struct KeyInfo {
  const char* name;
  Kind kind;
  bool parameter;  // takes a ":K" suffix (policy-param requires one)
};

constexpr KeyInfo kKeys[] = {
    {"workload", Kind::kWorkload, false},    {"trace", Kind::kTrace, false},
    {"workload-arg", Kind::kWorkloadArg, true}, {"device", Kind::kDevice, false},
    {"device-param", Kind::kDeviceParam, true}, {"backend", Kind::kBackend, false},
    {"policy", Kind::kPolicy, false},        {"policy-param", Kind::kPolicyParam, true},
    {"capacity", Kind::kCapacity, false},    {"replay", Kind::kReplay, false},
};

std::string KnownKeys() {
  std::vector<std::string> names;
  for (const KeyInfo& info : kKeys) {
    names.push_back(info.parameter ? absl::StrCat(info.name, "[:K]") : info.name);
  }
  return absl::StrJoin(names, ", ");
}

struct ParsedKey {
  Kind kind;
  std::string parameter;  // the K of "workload-arg:K"; empty if none
};

absl::StatusOr<ParsedKey> ParseKey(const std::string& where, const std::string& key) {
  const size_t colon = key.find(':');
  const std::string base = key.substr(0, colon);
  const std::string parameter = colon == std::string::npos ? "" : key.substr(colon + 1);
  for (const KeyInfo& info : kKeys) {
    if (base != info.name) continue;
    if (colon != std::string::npos && (!info.parameter || parameter.empty())) break;
    if (info.kind == Kind::kPolicyParam && parameter.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: \"policy-param\" needs a parameter name: \"policy-param:NAME\"", where));
    }
    return ParsedKey{info.kind, parameter};
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: unknown key \"%s\"; known: %s", where, key, KnownKeys()));
}

// Strings as written; numbers as JSON writes them (0.5, 256).
absl::StatusOr<std::string> ScalarText(const std::string& where, const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return JsonText(value);
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: values are strings or numbers, not %s", where, value.type_name()));
}

absl::Status GridError(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("grid %s: %s", path, what));
}

// Reads one "fixed" or "axes" object into keys.
absl::Status ReadKeys(const std::string& path, const Json& grid, const char* member, bool axes,
                      std::vector<GridKey>& out) {
  auto it = grid.find(member);
  if (it == grid.end()) return absl::OkStatus();
  if (!it->is_object()) return GridError(path, absl::StrFormat("\"%s\" must be an object", member));
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    const std::string where =
        absl::StrFormat("grid %s, %s \"%s\"", path, axes ? "axis" : "fixed", entry.key());
    absl::StatusOr<ParsedKey> key = ParseKey(absl::StrCat("grid ", path), entry.key());
    if (!key.ok()) return key.status();
    GridKey& out_key = out.emplace_back();
    out_key.key = entry.key();
    const bool list = entry->is_array();
    const bool list_allowed =
        axes || ((key->kind == Kind::kWorkloadArg || key->kind == Kind::kDeviceParam) &&
                 key->parameter.empty());
    if (list && !list_allowed) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: one value here; a list of values is an axis (or a repeatable "
          "workload-arg/device-param)",
          where));
    }
    if (axes && !list) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: an axis is a list of values, e.g. [\"a\", \"b\"]", where));
    }
    if (list && entry->empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: is empty", where));
    }
    std::set<std::string> seen;
    for (const Json& value : list ? *entry : Json::array({*entry})) {
      absl::StatusOr<std::string> text = ScalarText(where, value);
      if (!text.ok()) return text.status();
      if (text->empty()) return absl::InvalidArgumentError(where + ": holds an empty value");
      if (!seen.insert(*text).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: lists \"%s\" twice", where, *text));
      }
      if (key->kind == Kind::kTrace) {
        // A trace beside the grid is found wherever the sweep is started.
        const std::filesystem::path trace(*text);
        *text = trace.is_absolute()
                    ? trace.string()
                    : (std::filesystem::absolute(std::filesystem::path(path).parent_path()) /
                       trace)
                          .lexically_normal()
                          .string();
      }
      out_key.values.push_back(*text);
    }
  }
  return absl::OkStatus();
}

absl::Status ReadSlurm(const std::string& path, const Json& grid, SlurmSettings& slurm) {
  auto it = grid.find("slurm");
  if (it == grid.end()) return absl::OkStatus();
  const std::string where = absl::StrCat("grid ", path, ", \"slurm\"");
  if (!it->is_object()) return absl::InvalidArgumentError(where + ": must be an object");
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    const std::string& key = entry.key();
    if (key == "max_running") {
      if (!entry->is_number_integer() || entry->get<int64_t>() < 1) {
        return absl::InvalidArgumentError(where + ": \"max_running\" is a whole number >= 1");
      }
      slurm.max_running = static_cast<int>(std::min<int64_t>(entry->get<int64_t>(), 1 << 20));
    } else if (key == "args") {
      if (!entry->is_array()) {
        return absl::InvalidArgumentError(where + ": \"args\" is a list of sbatch options");
      }
      for (const Json& arg : *entry) {
        if (!arg.is_string()) {
          return absl::InvalidArgumentError(where + ": \"args\" holds strings");
        }
        slurm.args.push_back(arg.get<std::string>());
      }
    } else if (key == "time" || key == "mem") {
      absl::StatusOr<std::string> text = ScalarText(where, *entry);
      if (!text.ok()) return text.status();
      (key == "time" ? slurm.time : slurm.mem) = *text;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: unknown key \"%s\"; known: max_running, args, time, mem", where, key));
    }
  }
  return absl::OkStatus();
}

void Apply(CaseSpec& spec, const std::string& key, const std::string& value) {
  // Keys were checked by ParseGrid.
  const ParsedKey parsed = *ParseKey("", key);
  const std::string item =
      parsed.parameter.empty() ? value : absl::StrCat(parsed.parameter, "=", value);
  switch (parsed.kind) {
    case Kind::kWorkload: spec.workload = value; break;
    case Kind::kTrace: spec.trace = value; break;
    case Kind::kWorkloadArg: spec.workload_args.push_back(item); break;
    case Kind::kDevice: spec.device = value; break;
    case Kind::kDeviceParam: spec.device_params.push_back(item); break;
    case Kind::kBackend: spec.backend = value; break;
    case Kind::kPolicy: spec.policy = value; break;
    case Kind::kPolicyParam: spec.policy_params.push_back(item); break;
    case Kind::kCapacity: spec.capacity = value; break;
    case Kind::kReplay: spec.replay = value; break;
  }
}

std::vector<std::string> Arguments(const CaseSpec& spec) {
  std::vector<std::string> args;
  if (!spec.trace.empty()) {
    args = {"replay", spec.trace};
  } else {
    args = {"run", "--workload=" + spec.workload};
  }
  for (const std::string& arg : spec.workload_args) args.push_back("--workload-arg=" + arg);
  if (!spec.device.empty()) args.push_back("--device=" + spec.device);
  for (const std::string& param : spec.device_params) args.push_back("--device-param=" + param);
  if (!spec.backend.empty()) args.push_back("--backend=" + spec.backend);
  if (const std::string policy = spec.PolicySpec(); !policy.empty()) {
    args.push_back("--policy=" + policy);
  }
  if (!spec.capacity.empty()) args.push_back("--capacity=" + spec.capacity);
  if (!spec.replay.empty()) args.push_back("--replay=" + spec.replay);
  args.push_back("--format=json");
  return args;
}

// One coordinate as it reads in a file name: letters, digits and . + -.
std::string SlugPart(const std::string& key, const std::string& value) {
  const ParsedKey parsed = *ParseKey("", key);
  std::string text = value;
  if (parsed.kind == Kind::kTrace) text = std::filesystem::path(value).stem().string();
  if (!parsed.parameter.empty()) text = absl::StrCat(parsed.parameter, "-", text);
  if (parsed.kind == Kind::kCapacity) text = absl::StrCat("cap", text);
  for (char& c : text) {
    if (c == ',') {
      c = '+';
    } else if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '+' &&
               c != '-') {
      c = '-';
    }
  }
  return text;
}

std::string CaseName(const std::vector<std::pair<std::string, std::string>>& coordinates,
                     const std::vector<std::string>& args) {
  // The slug orders the axes as the command line does, so reordering the
  // axes in the file renames nothing.
  std::vector<std::pair<std::string, std::string>> ordered = coordinates;
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) {
    const ParsedKey ka = *ParseKey("", a.first), kb = *ParseKey("", b.first);
    return std::tie(ka.kind, ka.parameter) < std::tie(kb.kind, kb.parameter);
  });
  std::vector<std::string> parts;
  for (const auto& [key, value] : ordered) parts.push_back(SlugPart(key, value));
  std::string slug = parts.empty() ? "case" : absl::StrJoin(parts, "_");
  constexpr size_t kMaxSlug = 96;  // names stay far below NAME_MAX (255)
  if (slug.size() > kMaxSlug) slug.resize(kMaxSlug);
  // The hash covers every argument, fixed ones included, in sorted order.
  std::vector<std::string> sorted = args;
  std::sort(sorted.begin(), sorted.end());
  const uint64_t hash = StableHash(absl::StrJoin(sorted, "\n"));
  return absl::StrFormat("%s-%012x", slug, hash >> 16);
}

}  // namespace

std::string CaseSpec::PolicySpec() const {
  if (policy_params.empty()) return policy;
  const std::string name = policy.empty() ? "demand" : policy;
  return absl::StrCat(name, name.find(':') == std::string::npos ? ":" : ",",
                      absl::StrJoin(policy_params, ","));
}

std::string ShellQuote(const std::string& text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
  });
  if (safe) return text;
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'");
}

uint64_t StableHash(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

absl::StatusOr<Grid> ParseGrid(const std::string& path, const std::string& text) {
  // No exceptions cross into our code: a parse error yields a discarded value.
  const Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return GridError(path, "not valid JSON");
  if (!json.is_object()) return GridError(path, "expected an object with \"axes\"");
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() != "axes" && it.key() != "fixed" && it.key() != "slurm" &&
        it.key() != "comment") {
      return GridError(path, absl::StrFormat(
                                 "unknown member \"%s\"; known: axes, fixed, slurm, comment",
                                 it.key()));
    }
  }
  Grid grid;
  if (absl::Status s = ReadKeys(path, json, "fixed", false, grid.fixed); !s.ok()) return s;
  if (absl::Status s = ReadKeys(path, json, "axes", true, grid.axes); !s.ok()) return s;
  if (absl::Status s = ReadSlurm(path, json, grid.slurm); !s.ok()) return s;

  std::set<Kind> kinds;
  for (const GridKey& fixed : grid.fixed) {
    for (const GridKey& axis : grid.axes) {
      if (axis.key == fixed.key) {
        return GridError(path, absl::StrFormat("\"%s\" is both fixed and an axis", axis.key));
      }
    }
    kinds.insert(ParseKey("", fixed.key)->kind);
  }
  for (const GridKey& axis : grid.axes) kinds.insert(ParseKey("", axis.key)->kind);
  const bool workload = kinds.contains(Kind::kWorkload), trace = kinds.contains(Kind::kTrace);
  if (workload == trace) {
    return GridError(path, "give a \"workload\" or a \"trace\" (fixed or an axis), not both");
  }
  if (trace && kinds.contains(Kind::kWorkloadArg)) {
    return GridError(path, "a trace's program is recorded: it takes no \"workload-arg\"");
  }
  return grid;
}

std::vector<SweepCase> ExpandGrid(const Grid& grid) {
  std::vector<SweepCase> cases;
  // An odometer over the axes: the last axis turns fastest.
  std::vector<size_t> index(grid.axes.size(), 0);
  while (true) {
    SweepCase& c = cases.emplace_back();
    for (const GridKey& fixed : grid.fixed) {
      for (const std::string& value : fixed.values) Apply(c.spec, fixed.key, value);
    }
    for (size_t a = 0; a < grid.axes.size(); ++a) {
      const std::string& value = grid.axes[a].values[index[a]];
      Apply(c.spec, grid.axes[a].key, value);
      c.coordinates.emplace_back(grid.axes[a].key, value);
    }
    c.args = Arguments(c.spec);
    c.name = CaseName(c.coordinates, c.args);
    size_t a = grid.axes.size();
    while (a > 0 && ++index[a - 1] == grid.axes[a - 1].values.size()) index[--a] = 0;
    if (a == 0) break;
  }
  return cases;
}

}  // namespace umlab::cli
