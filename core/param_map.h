// Named, typed, defaulted parameters for policies and workloads.
//
// A component declares its parameters once (name, type, default, help and,
// for a number, the range it accepts), as the UVM driver declares each
// tunable with _MIN/_DEFAULT/_MAX; the user overrides them with
// "key=value,key=value". Resolve() validates every key, type and range up
// front, so a component reads plain values afterwards and a bad value fails
// before a run starts, with a message that names the component.
#ifndef UMLAB_CORE_PARAM_MAP_H_
#define UMLAB_CORE_PARAM_MAP_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace umlab {

enum class ParamType { kInt, kDouble, kBool, kString, kBytes };

// The values an int, number or bytes parameter accepts: an interval whose
// ends may be open. The default accepts any value. Written in declarations
// as ParamRange::Closed(1, 64), ParamRange::AtLeast(0), ParamRange::Positive().
struct ParamRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;  // true: min itself is excluded
  bool max_open = false;

  static constexpr ParamRange Closed(double lo, double hi) { return {lo, hi, false, false}; }
  static constexpr ParamRange ClosedOpen(double lo, double hi) { return {lo, hi, false, true}; }
  static constexpr ParamRange OpenClosed(double lo, double hi) { return {lo, hi, true, false}; }
  static constexpr ParamRange AtLeast(double lo) {
    return {lo, std::numeric_limits<double>::infinity(), false, true};
  }
  // Greater than zero: for rates, sizes and factors where 0 means nothing.
  static constexpr ParamRange Positive() { return AtLeast(0).WithOpenMin(); }

  bool bounded() const { return min > -std::numeric_limits<double>::infinity() ||
                                max < std::numeric_limits<double>::infinity(); }
  bool Contains(double value) const;
  // Interval notation: "[1, 64]", "(0, inf)", "[0, 1)".
  std::string ToString() const;

 private:
  constexpr ParamRange WithOpenMin() const { return {min, max, true, max_open}; }
};

struct ParamInfo {
  std::string name;
  ParamType type = ParamType::kInt;
  std::string default_value;
  std::string help;
  ParamRange range = {};  // int, number and bytes only
  // String only: the values it accepts, checked in Resolve like a range
  // (empty: any string). A factory maps them with ParamMap::Choice.
  std::vector<std::string> choices = {};
};

const char* ParamTypeName(ParamType type);

class ParamMap {
 public:
  ParamMap() = default;

  // Defaults from `declared`, overridden by `overrides` ("k=v,k=v"; empty is
  // fine). `owner` names the component in errors, e.g. "policy deepum".
  static absl::StatusOr<ParamMap> Resolve(absl::Span<const ParamInfo> declared,
                                          absl::string_view overrides,
                                          absl::string_view owner);

  // Typed reads of a declared parameter. Resolve() has validated the value,
  // so these cannot fail for declared names; an undeclared name is a
  // programming error and aborts.
  int64_t Int(absl::string_view name) const;
  double Double(absl::string_view name) const;
  bool Bool(absl::string_view name) const;
  uint64_t Bytes(absl::string_view name) const;
  const std::string& String(absl::string_view name) const;
  // For a parameter declared with choices: the index of its value among
  // them, so that a factory can map it onto an enum declared in the same
  // order.
  size_t Choice(absl::string_view name) const;

  // "k=v,k=v" with every parameter, in name order: for reports.
  std::string ToString() const;

 private:
  const std::string& Raw(absl::string_view name) const;
  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, size_t, std::less<>> choices_;
};

// Splits "name:k=v,k=v" into ("name", "k=v,k=v").
std::pair<std::string, std::string> SplitSpec(absl::string_view spec);

}  // namespace umlab

#endif  // UMLAB_CORE_PARAM_MAP_H_
