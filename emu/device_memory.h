// The device's own page table over 2 MB frames: which pages are mapped, and
// which were touched or written since they were mapped (the device knows
// this; the engine asks through Backend::QueryUse).
//
// Frames are a hard limit: mapping into a block that holds no frame when
// every frame is taken fails. The engine never lets that happen; the check
// is here so a bug in the engine or a policy shows as an error, not as a
// quietly oversubscribed device.
#ifndef UMLAB_EMU_DEVICE_MEMORY_H_
#define UMLAB_EMU_DEVICE_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "core/backend.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

class DeviceMemory {
 public:
  explicit DeviceMemory(uint64_t capacity_frames) : capacity_frames_(capacity_frames) {}

  // The hot path: true if the page is mapped, in which case the access is
  // recorded (accessed, and dirty for a write).
  bool Access(PageNumber page, bool write) {
    Frame* frame = Lookup(BlockOfPage(page));
    if (frame == nullptr) return false;
    const int index = PageIndexInBlock(page);
    if (!frame->mapped.test(index)) return false;
    frame->accessed.set(index);
    if (write) frame->dirty.set(index);
    return true;
  }

  // The sim's bulk path: how many pages in a row from `first`, at most
  // `max_pages` and never past the end of its block (nor more than 64), are
  // mapped. Nothing is recorded; RecordAccesses does that for the pages
  // actually consumed.
  uint64_t MappedRun(PageNumber first, uint64_t max_pages);
  // Records accesses to [first, first + count), which must be mapped and in
  // one block (a MappedRun's answer or less).
  void RecordAccesses(PageNumber first, uint64_t count, bool write);

  bool IsMapped(PageNumber page) const;

  // Maps `pages`; `dirty` marks those whose only valid copy is now on the
  // device (zero-filled pages). Fails if the block needs a frame and none
  // is free.
  absl::Status Map(BlockNumber block, const PageMask& pages, const PageMask& dirty);
  // Unmaps `pages`; a block left with nothing mapped gives its frame back.
  void Unmap(BlockNumber block, const PageMask& pages);
  PageUse Use(BlockNumber block) const;
  PageMask Mapped(BlockNumber block) const;

  // Remote mappings: pages the device reaches in host memory. They hold no
  // frame and are never mapped locally at the same time.
  absl::Status MapRemote(BlockNumber block, const PageMask& pages);
  void UnmapRemote(BlockNumber block, const PageMask& pages);
  PageMask Remote(BlockNumber block) const;
  // Whether `page` is mapped remotely (the sim's miss path asks).
  bool IsRemote(PageNumber page) const {
    if (remote_.empty()) return false;
    auto it = remote_.find(BlockOfPage(page));
    return it != remote_.end() && it->second.test(PageIndexInBlock(page));
  }

  uint64_t used_frames() const { return used_frames_; }
  uint64_t peak_frames() const { return peak_frames_; }
  uint64_t capacity_frames() const { return capacity_frames_; }

 private:
  struct Frame {
    PageMask mapped, accessed, dirty;
  };

  Frame* Lookup(BlockNumber block) {
    if (block == cached_block_) return cached_frame_;
    auto it = frames_.find(block);
    cached_block_ = block;
    cached_frame_ = it == frames_.end() ? nullptr : &it->second;
    return cached_frame_;
  }
  void ForgetCache() {
    cached_block_ = UINT64_MAX;
    cached_frame_ = nullptr;
  }

  uint64_t capacity_frames_;
  uint64_t used_frames_ = 0;
  uint64_t peak_frames_ = 0;
  // Only blocks holding a frame are present. Node-based so that the cached
  // pointer stays valid while other blocks come and go.
  absl::node_hash_map<BlockNumber, Frame> frames_;
  absl::flat_hash_map<BlockNumber, PageMask> remote_;
  BlockNumber cached_block_ = UINT64_MAX;
  Frame* cached_frame_ = nullptr;
};

}  // namespace umlab

#endif  // UMLAB_EMU_DEVICE_MEMORY_H_
