#include "core/role_residency.h"

#include <algorithm>

namespace umlab {

void RoleResidency::Count(const Owners* owners, const PageMask& mask, int64_t sign) {
  if (mask.none()) return;
  uint64_t known = 0;
  if (owners != nullptr) {
    for (const auto& [role, owned] : *owners) {
      const uint64_t pages = (owned & mask).count();
      now_[static_cast<int>(role)] += sign * static_cast<int64_t>(pages);
      known += pages;
    }
  }
  const uint64_t all = mask.count();
  now_[kUnknownRoleSlot] += sign * static_cast<int64_t>(all - known);
}

void RoleResidency::Assign(BlockNumber block, const PageMask& pages,
                           std::optional<TensorRole> role, const PageMask& on_device) {
  if (!role.has_value() && roles_.empty()) return;
  Owners& owners = roles_[block];
  const PageMask moving = pages & on_device;
  Count(&owners, moving, -1);
  for (auto& [owner, owned] : owners) owned &= ~pages;
  if (role.has_value()) {
    auto it = std::find_if(owners.begin(), owners.end(),
                           [&](const auto& entry) { return entry.first == *role; });
    if (it == owners.end()) {
      owners.emplace_back(*role, pages);
    } else {
      it->second |= pages;
    }
  }
  owners.erase(std::remove_if(owners.begin(), owners.end(),
                              [](const auto& entry) { return entry.second.none(); }),
               owners.end());
  Count(&owners, moving, +1);
  if (owners.empty()) roles_.erase(block);
}

void RoleResidency::Change(BlockNumber block, const PageMask& before, const PageMask& after) {
  const PageMask gained = after & ~before;
  const PageMask lost = before & ~after;
  if (gained.none() && lost.none()) return;
  auto it = roles_.find(block);
  const Owners* owners = it == roles_.end() ? nullptr : &it->second;
  Count(owners, gained, +1);
  Count(owners, lost, -1);
  total_ += gained.count();
  total_ -= lost.count();
  NotePeak();
}

void RoleResidency::NotePeak() {
  if (total_ < peak_total_) return;
  peak_total_ = total_;
  at_peak_ = now_;
}

}  // namespace umlab
