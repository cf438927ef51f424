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
  const uint32_t index = index_.Find(block);
  return index == BlockIndex::kAbsent ? nullptr : &blocks_[index];
}

BlockState* MemoryState::FindMutable(BlockNumber block) {
  const uint32_t index = index_.Find(block);
  return index == BlockIndex::kAbsent ? nullptr : &blocks_[index];
}

BlockState& MemoryState::Get(BlockNumber block) {
  uint32_t& index = index_.Slot(block);
  if (index == BlockIndex::kAbsent) {
    index = static_cast<uint32_t>(blocks_.size());
    blocks_.emplace_back();
    blocks_.back().number = block;
    older_.push_back(kNone);
    younger_.push_back(kNone);
  }
  return blocks_[index];
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

void MemoryState::PlaceCopies(BlockState& block, const PageMask& pages, MemoryTier tier) {
  ForgetCopies(block, pages);
  if (tier == MemoryTier::kHost) {
    block.on_host |= pages;
    host_pages_ += pages.count();
  } else {
    block.in_storage |= pages;
    storage_pages_ += pages.count();
  }
}

void MemoryState::ForgetCopies(BlockState& block, const PageMask& pages) {
  const PageMask host = block.on_host & pages, storage = block.in_storage & pages;
  host_pages_ -= host.count();
  storage_pages_ -= storage.count();
  block.on_host &= ~host;
  block.in_storage &= ~storage;
}

void MemoryState::ClaimFrame(BlockState& block, Nanos now) {
  block.has_frame = true;
  ++used_frames_;
  ++evictable_generation_;
  block.last_migrated_ns = now;
  LinkYoungest(IndexOf(block));
}

void MemoryState::ReleaseFrame(BlockState& block) {
  block.has_frame = false;
  --used_frames_;
  Unlink(IndexOf(block));
}

void MemoryState::TouchMigrated(BlockState& block, Nanos now) {
  block.last_migrated_ns = now;
  const uint32_t index = IndexOf(block);
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
