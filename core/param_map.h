// Named, typed, defaulted parameters for policies and workloads.
//
// A component declares its parameters once (name, type, default, help); the
// user overrides them with "key=value,key=value". Resolve() validates every
// key and value up front, so a component reads plain values afterwards and a
// typo fails before a run starts, with a message that names the component.
#ifndef UMLAB_CORE_PARAM_MAP_H_
#define UMLAB_CORE_PARAM_MAP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace umlab {

enum class ParamType { kInt, kDouble, kBool, kString, kBytes };

struct ParamInfo {
  std::string name;
  ParamType type = ParamType::kInt;
  std::string default_value;
  std::string help;
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

  // "k=v,k=v" with every parameter, in name order: for reports.
  std::string ToString() const;

 private:
  const std::string& Raw(absl::string_view name) const;
  std::map<std::string, std::string, std::less<>> values_;
};

// Splits "name:k=v,k=v" into ("name", "k=v,k=v").
std::pair<std::string, std::string> SplitSpec(absl::string_view spec);

}  // namespace umlab

#endif  // UMLAB_CORE_PARAM_MAP_H_
