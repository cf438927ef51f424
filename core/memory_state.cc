#include "core/memory_state.h"

namespace umlab {

std::optional<BlockNumber> MemoryView::LeastRecentlyMigrated(
    absl::FunctionRef<bool(const BlockState&)> eligible,
    std::optional<BlockNumber> except) const {
  std::optional<BlockNumber> victim;
  ForEachByMigrationAge([&](const BlockState& block) {
    if (block.Evictable() && block.number != except && eligible(block)) {
      victim = block.number;
      return false;
    }
    return true;
  });
  return victim;
}

const BlockState* MemoryState::Find(BlockNumber block) const {
  auto it = index_.find(block);
  return it == index_.end() ? nullptr : &blocks_[it->second];
}

BlockState* MemoryState::FindMutable(BlockNumber block) {
  auto it = index_.find(block);
  return it == index_.end() ? nullptr : &blocks_[it->second];
}

BlockState& MemoryState::Get(BlockNumber block) {
  auto [it, inserted] = index_.try_emplace(block, static_cast<uint32_t>(blocks_.size()));
  if (inserted) {
    blocks_.emplace_back();
    blocks_.back().number = block;
    older_.push_back(kNone);
    younger_.push_back(kNone);
  }
  return blocks_[it->second];
}

void MemoryState::Unlink(uint32_t index) {
  const uint32_t older = older_[index], younger = younger_[index];
  if (older != kNone) younger_[older] = younger; else oldest_ = younger;
  if (younger != kNone) older_[younger] = older; else youngest_ = older;
  older_[index] = younger_[index] = kNone;
}

void MemoryState::LinkYoungest(uint32_t index) {
  older_[index] = youngest_;
  younger_[index] = kNone;
  if (youngest_ != kNone) younger_[youngest_] = index; else oldest_ = index;
  youngest_ = index;
}

void MemoryState::ClaimFrame(BlockState& block, Nanos now) {
  block.has_frame = true;
  ++used_frames_;
  block.last_migrated_ns = now;
  LinkYoungest(index_.at(block.number));
}

void MemoryState::ReleaseFrame(BlockState& block) {
  block.has_frame = false;
  --used_frames_;
  Unlink(index_.at(block.number));
}

void MemoryState::TouchMigrated(BlockState& block, Nanos now) {
  block.last_migrated_ns = now;
  const uint32_t index = index_.at(block.number);
  Unlink(index);
  LinkYoungest(index);
}

void MemoryState::ForEachByMigrationAge(
    absl::FunctionRef<bool(const BlockState&)> visit) const {
  for (uint32_t i = oldest_; i != kNone; i = younger_[i]) {
    if (!visit(blocks_[i])) return;
  }
}

}  // namespace umlab
