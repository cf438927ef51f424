// A registry of named, parameterised factories: how policies and workloads
// make themselves available by name without any central list to edit.
//
// Each policy or workload source file registers itself from a static
// initializer; see UMLAB_REGISTER_POLICY in core/policy.h for the pattern.
// A name registered twice aborts at start-up (core/named_index.h), and every
// parameter is range-checked by ParamMap::Resolve before a factory runs.
#ifndef UMLAB_CORE_REGISTRY_H_
#define UMLAB_CORE_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "core/named_index.h"
#include "core/param_map.h"

namespace umlab {

// What a registry's entries carry besides name, parameters and factory:
// nothing, unless a kind of component needs more (see BackendTraits).
struct NoTraits {};

template <typename Product, typename Traits, typename... Args>
class BasicRegistry {
 public:
  using Factory =
      std::function<absl::StatusOr<std::unique_ptr<Product>>(const ParamMap&, Args...)>;

  struct Entry {
    std::string name;
    std::string description;
    std::vector<ParamInfo> params;
    Factory factory;
    Traits traits = {};
  };

  // `kind` names what is registered, for messages: "policy", "workload".
  explicit BasicRegistry(std::string kind) : index_(std::move(kind)) {}

  // Aborts when the name is taken; returns true for static registration.
  bool Register(Entry entry) { return index_.Add(std::move(entry)); }

  const Entry* Find(absl::string_view name) const { return index_.Find(name); }

  // Entries in name order.
  std::vector<const Entry*> Entries() const { return index_.Entries(); }

  std::string Names() const { return index_.Names(); }

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
      return absl::NotFoundError(absl::StrFormat("unknown %s '%s'; known: %s", index_.kind(),
                                                 name, Names()));
    }
    absl::StatusOr<ParamMap> params = ParamMap::Resolve(
        entry->params, overrides, absl::StrFormat("%s %s", index_.kind(), name));
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
  NamedIndex<Entry> index_;
};

template <typename Product, typename... Args>
using Registry = BasicRegistry<Product, NoTraits, Args...>;

}  // namespace umlab

#endif  // UMLAB_CORE_REGISTRY_H_
