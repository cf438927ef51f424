#include "core/param_map.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/byte_size.h"

namespace umlab {
namespace {

// Parses `value` as `info`'s type; for a numeric type, also checks the
// range. Every value goes through here, the declared defaults included, so a
// default outside its own range is caught as surely as a user's typo.
absl::Status CheckValue(const ParamInfo& info, absl::string_view value,
                        absl::string_view owner) {
  bool ok = true;
  std::optional<double> number;
  switch (info.type) {
    case ParamType::kInt: {
      int64_t parsed;
      ok = absl::SimpleAtoi(value, &parsed);
      number = static_cast<double>(parsed);
      break;
    }
    case ParamType::kDouble: {
      // SimpleAtod takes "inf" and "nan"; no parameter means either.
      double parsed;
      ok = absl::SimpleAtod(value, &parsed) && std::isfinite(parsed);
      number = parsed;
      break;
    }
    case ParamType::kBool: {
      bool parsed;
      ok = absl::SimpleAtob(value, &parsed);
      break;
    }
    case ParamType::kBytes: {
      absl::StatusOr<uint64_t> parsed = ParseByteSize(value);
      ok = parsed.ok();
      if (ok) number = static_cast<double>(*parsed);
      break;
    }
    case ParamType::kString:
      if (!info.choices.empty() &&
          std::find(info.choices.begin(), info.choices.end(), value) == info.choices.end()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: parameter %s=%s is not one of: %s", owner, info.name, value,
            absl::StrJoin(info.choices, ", ")));
      }
      break;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: parameter %s=%s is not a valid %s value", owner, info.name,
                        value, ParamTypeName(info.type)));
  }
  if (number.has_value() && !info.range.Contains(*number)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: parameter %s=%s is out of range; allowed: %s", owner, info.name,
                        value, info.range.ToString()));
  }
  return absl::OkStatus();
}

// A bound as written in a declaration: integers in full, not as 4.1943e+06.
std::string BoundText(double bound) {
  if (std::isinf(bound)) return bound > 0 ? "inf" : "-inf";
  if (bound == std::floor(bound) && std::fabs(bound) < 1e15) {
    return absl::StrFormat("%.0f", bound);
  }
  return absl::StrFormat("%g", bound);
}

}  // namespace

bool ParamRange::Contains(double value) const {
  const bool above_min = min_open ? value > min : value >= min;
  const bool below_max = max_open ? value < max : value <= max;
  return above_min && below_max;
}

std::string ParamRange::ToString() const {
  return absl::StrCat(min_open || std::isinf(min) ? "(" : "[", BoundText(min), ", ",
                      BoundText(max), max_open || std::isinf(max) ? ")" : "]");
}

const char* ParamTypeName(ParamType type) {
  switch (type) {
    case ParamType::kInt: return "int";
    case ParamType::kDouble: return "number";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
    case ParamType::kBytes: return "bytes";
  }
  return "?";
}

absl::StatusOr<ParamMap> ParamMap::Resolve(absl::Span<const ParamInfo> declared,
                                           absl::string_view overrides,
                                           absl::string_view owner) {
  ParamMap map;
  for (const ParamInfo& info : declared) map.values_[info.name] = info.default_value;
  for (absl::string_view item :
       absl::StrSplit(overrides, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    const ParamInfo* info = nullptr;
    for (const ParamInfo& candidate : declared) {
      if (candidate.name == key) info = &candidate;
    }
    if (info == nullptr) {
      std::vector<std::string> names;
      for (const ParamInfo& candidate : declared) names.push_back(candidate.name);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has no parameter '%s'; it takes: %s", owner, key,
          names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
    }
    if (item.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: write '%s=VALUE'", owner, key));
    }
    map.values_[std::string(key)] = std::string(value);
  }
  for (const ParamInfo& info : declared) {
    const std::string& value = map.values_[info.name];
    if (absl::Status status = CheckValue(info, value, owner); !status.ok()) return status;
    if (!info.choices.empty()) {
      map.choices_[info.name] = static_cast<size_t>(
          std::find(info.choices.begin(), info.choices.end(), value) - info.choices.begin());
    }
  }
  return map;
}

namespace {

// Reading a parameter the component never declared is a programming error.
template <typename Map>
const typename Map::mapped_type& Lookup(const Map& map, absl::string_view name,
                                        const char* what) {
  auto it = map.find(name);
  if (it == map.end()) {
    std::fprintf(stderr, "umlab: internal error: %s '%s'\n", what, std::string(name).c_str());
    std::abort();
  }
  return it->second;
}

}  // namespace

const std::string& ParamMap::Raw(absl::string_view name) const {
  return Lookup(values_, name, "undeclared parameter");
}

int64_t ParamMap::Int(absl::string_view name) const {
  int64_t value = 0;
  (void)absl::SimpleAtoi(Raw(name), &value);
  return value;
}

double ParamMap::Double(absl::string_view name) const {
  double value = 0;
  (void)absl::SimpleAtod(Raw(name), &value);
  return value;
}

bool ParamMap::Bool(absl::string_view name) const {
  bool value = false;
  (void)absl::SimpleAtob(Raw(name), &value);
  return value;
}

uint64_t ParamMap::Bytes(absl::string_view name) const {
  return ParseByteSize(Raw(name)).value_or(0);
}

const std::string& ParamMap::String(absl::string_view name) const { return Raw(name); }

size_t ParamMap::Choice(absl::string_view name) const {
  return Lookup(choices_, name, "no choices declared for parameter");
}

std::string ParamMap::ToString() const {
  return absl::StrJoin(values_, ",", absl::PairFormatter("="));
}

std::pair<std::string, std::string> SplitSpec(absl::string_view spec) {
  const size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) return {std::string(spec), ""};
  return {std::string(spec.substr(0, colon)), std::string(spec.substr(colon + 1))};
}

}  // namespace umlab
