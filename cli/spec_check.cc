#include "cli/spec_check.h"

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/backend_registry.h"
#include "core/param_map.h"
#include "core/policy.h"

namespace umlab::cli {

absl::Status CheckPolicySpec(const std::string& spec) {
  const auto [name, params] = SplitSpec(spec);
  const PolicyRegistry::Entry* entry = Policies().Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown policy '%s'; known: %s", name, Policies().Names()));
  }
  return ParamMap::Resolve(entry->params, params, absl::StrCat("policy ", name)).status();
}

absl::Status CheckBackendSpec(const std::string& spec) {
  const auto [name, params] = SplitSpec(spec);
  const BackendRegistry::Entry* entry = Backends().Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--backend=%s is not in this build; available: %s", name, Backends().Names()));
  }
  return ParamMap::Resolve(entry->params, params, absl::StrCat("backend ", name)).status();
}

}  // namespace umlab::cli
