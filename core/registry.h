// A registry of named, parameterised factories: how policies and workloads
// make themselves available by name without any central list to edit.
//
// Each policy or workload source file registers itself from a static
// initializer; see UMLAB_REGISTER_POLICY in core/policy.h for the pattern.
#ifndef UMLAB_CORE_REGISTRY_H_
#define UMLAB_CORE_REGISTRY_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/param_map.h"

namespace umlab {

template <typename Product, typename... Args>
class Registry {
 public:
  using Factory =
      std::function<absl::StatusOr<std::unique_ptr<Product>>(const ParamMap&, Args...)>;

  struct Entry {
    std::string name;
    std::string description;
    std::vector<ParamInfo> params;
    Factory factory;
  };

  // `kind` names what is registered, for messages: "policy", "workload".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  bool Register(Entry entry) {
    std::string name = entry.name;
    return entries_.emplace(std::move(name), std::move(entry)).second;
  }

  const Entry* Find(absl::string_view name) const {
    auto it = entries_.find(std::string(name));
    return it == entries_.end() ? nullptr : &it->second;
  }

  // Entries in name order.
  std::vector<const Entry*> Entries() const {
    std::vector<const Entry*> out;
    for (const auto& [name, entry] : entries_) out.push_back(&entry);
    return out;
  }

  std::string Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return absl::StrJoin(names, ", ");
  }

  // An entry and its parameters, resolved from a spec.
  struct Resolved {
    const Entry* entry;
    ParamMap params;
  };

  // Parses "name" or "name:k=v,k=v": finds the entry and resolves and checks
  // its parameters, without creating anything.
  absl::StatusOr<Resolved> Resolve(absl::string_view spec) const {
    auto [name, overrides] = SplitSpec(spec);
    const Entry* entry = Find(name);
    if (entry == nullptr) {
      return absl::NotFoundError(absl::StrFormat("unknown %s '%s'; known: %s", kind_,
                                                 name, Names()));
    }
    absl::StatusOr<ParamMap> params = ParamMap::Resolve(
        entry->params, overrides, absl::StrFormat("%s %s", kind_, name));
    if (!params.ok()) return params.status();
    return Resolved{entry, *std::move(params)};
  }

  // Creates from "name" or "name:k=v,k=v".
  absl::StatusOr<std::unique_ptr<Product>> Create(absl::string_view spec,
                                                  Args... args) const {
    absl::StatusOr<Resolved> resolved = Resolve(spec);
    if (!resolved.ok()) return resolved.status();
    return resolved->entry->factory(resolved->params, args...);
  }

 private:
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_REGISTRY_H_
