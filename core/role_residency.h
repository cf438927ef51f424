// Device memory by tensor role: how many of the pages the device holds
// (resident or arriving) belong to parameters, gradients, optimizer state,
// activations..., and the split at the instant the total peaked. MemFerry's
// main metric is peak device memory and which part of it is parameters; a
// run can only report that if the engine counts it as pages come and go.
//
// Roles come from the program's kActivate events (core/tensor_role.h). A
// page keeps the role of the last tensor activated over it; pages never
// activated with a role count as unknown.
#ifndef UMLAB_CORE_ROLE_RESIDENCY_H_
#define UMLAB_CORE_ROLE_RESIDENCY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "core/memory_units.h"
#include "core/page_mask.h"
#include "core/tensor_role.h"

namespace umlab {

// Pages per role; the last slot counts pages of no known role.
using RolePages = std::array<uint64_t, kTensorRoleCount + 1>;
inline constexpr int kUnknownRoleSlot = kTensorRoleCount;

class RoleResidency {
 public:
  // Tensors of `role` now own `pages` of `block`; `on_device` are the
  // block's pages the device holds, whose counts move to the new role.
  void Assign(BlockNumber block, const PageMask& pages, std::optional<TensorRole> role,
              const PageMask& on_device);

  // The block's device pages went from `before` to `after`.
  void Change(BlockNumber block, const PageMask& before, const PageMask& after);

  // Whether any activation carried a role (otherwise every page is unknown
  // and a breakdown says nothing).
  bool any_roles() const { return !roles_.empty(); }
  const RolePages& now() const { return now_; }
  uint64_t total_pages() const { return total_; }
  uint64_t peak_pages() const { return peak_total_; }
  // The split when the total last reached its peak.
  const RolePages& at_peak() const { return at_peak_; }

 private:
  using Owners = absl::InlinedVector<std::pair<TensorRole, PageMask>, 1>;
  // Adds `sign` x the pages of `mask` to their roles' counts.
  void Count(const Owners* owners, const PageMask& mask, int64_t sign);
  void NotePeak();

  absl::flat_hash_map<BlockNumber, Owners> roles_;
  RolePages now_{};
  RolePages at_peak_{};
  uint64_t total_ = 0;
  uint64_t peak_total_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_ROLE_RESIDENCY_H_
