#include "core/param_map.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/byte_size.h"

namespace umlab {
namespace {

absl::Status CheckValue(const ParamInfo& info, absl::string_view value,
                        absl::string_view owner) {
  bool ok = true;
  switch (info.type) {
    case ParamType::kInt: {
      int64_t parsed;
      ok = absl::SimpleAtoi(value, &parsed);
      break;
    }
    case ParamType::kDouble: {
      // SimpleAtod takes "inf" and "nan"; no parameter means either.
      double parsed;
      ok = absl::SimpleAtod(value, &parsed) && std::isfinite(parsed);
      break;
    }
    case ParamType::kBool: {
      bool parsed;
      ok = absl::SimpleAtob(value, &parsed);
      break;
    }
    case ParamType::kBytes:
      ok = ParseByteSize(value).ok();
      break;
    case ParamType::kString:
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: parameter %s=%s is not a valid %s value", owner, info.name,
                      value, ParamTypeName(info.type)));
}

}  // namespace

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
    if (absl::Status status = CheckValue(*info, value, owner); !status.ok()) {
      return status;
    }
    map.values_[std::string(key)] = std::string(value);
  }
  return map;
}

const std::string& ParamMap::Raw(absl::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    std::fprintf(stderr, "umlab: internal error: undeclared parameter '%s'\n",
                 std::string(name).c_str());
    std::abort();
  }
  return it->second;
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

std::string ParamMap::ToString() const {
  return absl::StrJoin(values_, ",", absl::PairFormatter("="));
}

std::pair<std::string, std::string> SplitSpec(absl::string_view spec) {
  const size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) return {std::string(spec), ""};
  return {std::string(spec.substr(0, colon)), std::string(spec.substr(colon + 1))};
}

}  // namespace umlab
