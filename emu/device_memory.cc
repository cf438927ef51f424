#include "emu/device_memory.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_format.h"

namespace umlab {

uint64_t DeviceMemory::MappedRun(PageNumber first, uint64_t max_pages) {
  const Frame* frame = Lookup(BlockOfPage(first));
  if (frame == nullptr) return 0;
  const int index = PageIndexInBlock(first);
  if (!frame->mapped.test(index)) return 0;  // a fault: skip the wide shift
  const uint64_t limit =
      std::min<uint64_t>({max_pages, static_cast<uint64_t>(kPagesPerBlock - index), 64});
  // The 64 pages from `first` as one word; the run is its trailing ones.
  const uint64_t word = ((frame->mapped >> index) & PageMask(~uint64_t{0})).to_ullong();
  return std::min<uint64_t>(static_cast<uint64_t>(std::countr_one(word)), limit);
}

void DeviceMemory::RecordAccesses(PageNumber first, uint64_t count, bool write) {
  if (count == 0) return;
  Frame* frame = Lookup(BlockOfPage(first));
  const PageMask pages = PageRangeMask(PageIndexInBlock(first), static_cast<int>(count));
  frame->accessed |= pages;
  if (write) frame->dirty |= pages;
}

bool DeviceMemory::IsMapped(PageNumber page) const {
  auto it = frames_.find(BlockOfPage(page));
  return it != frames_.end() && it->second.mapped.test(PageIndexInBlock(page));
}

absl::Status DeviceMemory::Map(BlockNumber block, const PageMask& pages,
                               const PageMask& dirty) {
  if (pages.none()) return absl::OkStatus();
  auto it = frames_.find(block);
  if (it == frames_.end()) {
    if (used_frames_ >= capacity_frames_) {
      return absl::InternalError(absl::StrFormat(
          "device memory full: block %#x needs a frame and all %d are taken",
          block * kBlockSize, capacity_frames_));
    }
    it = frames_.try_emplace(block).first;
    ++used_frames_;
    peak_frames_ = std::max(peak_frames_, used_frames_);
    ForgetCache();
  }
  Frame& frame = it->second;
  if (const PageMask both = pages & Remote(block); both.any()) {
    return absl::InternalError(absl::StrFormat(
        "block %#x: %d pages mapped locally while still mapped remotely", block * kBlockSize,
        both.count()));
  }
  frame.mapped |= pages;
  frame.accessed &= ~pages;
  frame.dirty = (frame.dirty & ~pages) | (dirty & pages);
  return absl::OkStatus();
}

void DeviceMemory::Unmap(BlockNumber block, const PageMask& pages) {
  auto it = frames_.find(block);
  if (it == frames_.end()) return;
  Frame& frame = it->second;
  frame.mapped &= ~pages;
  frame.accessed &= ~pages;
  frame.dirty &= ~pages;
  if (frame.mapped.none()) {
    frames_.erase(it);
    --used_frames_;
    ForgetCache();
  }
}

PageUse DeviceMemory::Use(BlockNumber block) const {
  auto it = frames_.find(block);
  if (it == frames_.end()) return PageUse{};
  return PageUse{it->second.accessed, it->second.dirty};
}

PageMask DeviceMemory::Mapped(BlockNumber block) const {
  auto it = frames_.find(block);
  return it == frames_.end() ? PageMask() : it->second.mapped;
}

absl::Status DeviceMemory::MapRemote(BlockNumber block, const PageMask& pages) {
  if (const PageMask both = pages & Mapped(block); both.any()) {
    return absl::InternalError(absl::StrFormat(
        "block %#x: %d pages mapped remotely while mapped on the device", block * kBlockSize,
        both.count()));
  }
  if (pages.any()) remote_[block] |= pages;
  return absl::OkStatus();
}

void DeviceMemory::UnmapRemote(BlockNumber block, const PageMask& pages) {
  auto it = remote_.find(block);
  if (it == remote_.end()) return;
  it->second &= ~pages;
  if (it->second.none()) remote_.erase(it);
}

PageMask DeviceMemory::Remote(BlockNumber block) const {
  auto it = remote_.find(block);
  return it == remote_.end() ? PageMask() : it->second;
}

}  // namespace umlab
