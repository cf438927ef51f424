// The engine's record of where every page lives: per 2 MB block, which pages
// are resident, in flight, inactive (freed by the allocator) or invalid (no
// valid copy anywhere), plus the order in which blocks were last migrated.
//
// Policies see it read-only through MemoryView; only the engine mutates it.
#ifndef UMLAB_CORE_MEMORY_STATE_H_
#define UMLAB_CORE_MEMORY_STATE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "core/block_index.h"
#include "core/memory_tier.h"
#include "core/memory_units.h"
#include "core/page_mask.h"
#include "core/transfer.h"

namespace umlab {

struct BlockState {
  BlockNumber number = 0;
  PageMask resident;           // on the device and mapped
  PageMask in_flight;          // being migrated to the device
  PageMask inactive;           // the allocator says the bytes are free
  PageMask invalid;            // no valid copy anywhere: populating zero-fills
  PageMask prefetched;         // made resident by a prefetch this residency
  // Mapped for the device to reach in host memory, without a migration
  // (PolicyContext::MapRemote): no frame, no fault; every access crosses
  // the link. Never resident, in flight, invalid or in storage.
  PageMask remote;
  // Where written-back copies are (MemoryState::PlaceCopies): at most one
  // tier per page. Without storage a clean page keeps its host copy while
  // resident, so evicting it again needs no write-back; behind a storage
  // tier a migration moves the page and releases its copy.
  PageMask on_host;
  PageMask in_storage;
  bool has_frame = false;      // holds a 2 MB device frame
  bool pinned = false;         // a policy forbids evicting it
  Nanos last_migrated_ns = -1; // when a migration into it last started
  int transfers_in_flight = 0; // migrations or evictions not yet finished
  TransferId last_eviction = 0;  // the newest eviction of this block (0: none)

  // Holds a frame and may give it up now.
  bool Evictable() const { return has_frame && transfers_in_flight == 0 && !pinned; }
  // Whether a copy a driver made into the block by itself would tell the
  // engine nothing: the engine's own transfer of it is under way (it hears
  // of that itself), or it holds every page already. The cuda backend and
  // sim:policy_from=user read the driver's transfer records by this.
  bool ExpectsNoNewsOfACopy() const {
    return transfers_in_flight > 0 || (has_frame && resident.all());
  }
};

// Read-only access for policies.
class MemoryView {
 public:
  virtual ~MemoryView() = default;

  // nullptr if the block was never allocated, faulted or migrated.
  virtual const BlockState* Find(BlockNumber block) const = 0;

  virtual uint64_t capacity_frames() const = 0;
  virtual uint64_t used_frames() const = 0;
  uint64_t free_frames() const {
    return used_frames() >= capacity_frames() ? 0 : capacity_frames() - used_frames();
  }

  // The tiers behind the device, in pages: written-back copies held there,
  // and, with storage, the host's line before evictions go to storage.
  virtual uint64_t host_pages() const = 0;
  virtual uint64_t storage_pages() const = 0;
  virtual uint64_t host_capacity_pages() const = 0;
  virtual bool has_storage() const = 0;
  // Whether `pages` more copies would cross the host's line (never without
  // storage: the host then has no limit).
  bool HostFull(uint64_t pages) const {
    return has_storage() && host_pages() + pages > host_capacity_pages();
  }

  // Blocks holding frames, least recently migrated first, until `visit`
  // returns false.
  virtual void ForEachByMigrationAge(
      absl::FunctionRef<bool(const BlockState&)> visit) const = 0;

  // Moves on whenever a block may have become evictable (a frame claimed,
  // a transfer finished, a pin lifted). A policy whose search found no
  // eligible victim need not search again until it moves or its own notion
  // of eligibility widens: on a 1 TB model the searches that fail are most
  // of a run's time.
  virtual uint64_t evictable_generation() const = 0;

  // The least recently migrated evictable block other than `except` for
  // which `eligible` holds: the UVM driver's default victim.
  std::optional<BlockNumber> LeastRecentlyMigrated(
      absl::FunctionRef<bool(const BlockState&)> eligible,
      std::optional<BlockNumber> except = std::nullopt) const;
};

class MemoryState : public MemoryView {
 public:
  explicit MemoryState(uint64_t capacity_frames, uint64_t host_capacity_pages = 0,
                       bool has_storage = false)
      : capacity_frames_(capacity_frames),
        host_capacity_pages_(host_capacity_pages),
        has_storage_(has_storage) {}

  const BlockState* Find(BlockNumber block) const override;
  uint64_t capacity_frames() const override { return capacity_frames_; }
  uint64_t used_frames() const override { return used_frames_; }
  void ForEachByMigrationAge(
      absl::FunctionRef<bool(const BlockState&)> visit) const override;
  uint64_t evictable_generation() const override { return evictable_generation_; }
  // A transfer of a block finished, or its pin was lifted.
  void NoteMayBeEvictable() { ++evictable_generation_; }
  uint64_t host_pages() const override { return host_pages_; }
  uint64_t storage_pages() const override { return storage_pages_; }
  uint64_t host_capacity_pages() const override { return host_capacity_pages_; }
  bool has_storage() const override { return has_storage_; }

  // `pages` were written back to `tier`: their copy is there now, and no
  // longer in the other tier.
  void PlaceCopies(BlockState& block, const PageMask& pages, MemoryTier tier);
  // `pages` hold no data any more (freed, or dropped without write-back):
  // their copies are released wherever they were.
  void ForgetCopies(BlockState& block, const PageMask& pages);
  // `pages` lose their data: invalid (the next population zero-fills them),
  // and their copies released.
  void LoseData(BlockState& block, const PageMask& pages) {
    block.invalid |= pages;
    ForgetCopies(block, pages);
  }

  // Finds or creates the record of a block.
  BlockState& Get(BlockNumber block);
  BlockState* FindMutable(BlockNumber block);

  // Frame bookkeeping. ClaimFrame puts the block at the young end of the
  // migration order; Touch moves it there on a later migration.
  void ClaimFrame(BlockState& block, Nanos now);
  void ReleaseFrame(BlockState& block);
  void TouchMigrated(BlockState& block, Nanos now);

  // Every block, in creation order (for checks and end-of-run accounting).
  const std::vector<BlockState>& blocks() const { return blocks_; }

 private:
  // `block` is one of blocks_ (the records are only handed out by reference).
  uint32_t IndexOf(const BlockState& block) const {
    return static_cast<uint32_t>(&block - blocks_.data());
  }
  void Unlink(uint32_t index);
  void LinkYoungest(uint32_t index);

  static constexpr uint32_t kNone = UINT32_MAX;
  uint64_t capacity_frames_;
  uint64_t used_frames_ = 0;
  uint64_t evictable_generation_ = 0;
  uint64_t host_capacity_pages_;
  bool has_storage_;
  uint64_t host_pages_ = 0;
  uint64_t storage_pages_ = 0;
  std::vector<BlockState> blocks_;
  BlockIndex index_;
  // Doubly linked migration order over blocks with frames, by index.
  std::vector<uint32_t> older_, younger_;
  uint32_t oldest_ = kNone, youngest_ = kNone;
};

}  // namespace umlab

#endif  // UMLAB_CORE_MEMORY_STATE_H_
