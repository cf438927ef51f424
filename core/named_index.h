// Entries by unique name, filled from static initializers: the part every
// registry (policies, workloads, backends, device presets) shares.
//
// Registration happens before main() in link order, so a second entry under
// a name already taken would otherwise silently shadow or be shadowed by the
// first, depending on the linker. Add() aborts instead, naming the kind and
// the name, so the clash is found the first time any binary starts.
#ifndef UMLAB_CORE_NAMED_INDEX_H_
#define UMLAB_CORE_NAMED_INDEX_H_

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace umlab {

// `Entry` has a `std::string name`.
template <typename Entry>
class NamedIndex {
 public:
  // `kind` names what is indexed, for messages: "policy", "device preset".
  explicit NamedIndex(std::string kind) : kind_(std::move(kind)) {}

  // Returns true so a registration can initialise a static bool.
  bool Add(Entry entry) {
    std::string name = entry.name;
    if (!entries_.emplace(name, std::move(entry)).second) {
      std::fprintf(stderr, "umlab: %s '%s' is registered twice; each name must be unique\n",
                   kind_.c_str(), name.c_str());
      std::abort();
    }
    return true;
  }

  const Entry* Find(absl::string_view name) const {
    auto it = entries_.find(name);
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

  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_NAMED_INDEX_H_
