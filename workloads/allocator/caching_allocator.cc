#include "workloads/allocator/caching_allocator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/byte_size.h"

namespace umlab {
namespace {

// Requests above this cannot be rounded or placed without overflowing the
// 64-bit address arithmetic; no device has that much memory anyway.
constexpr uint64_t kLargestRequest = 1ull << 60;

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

CachingAllocator::CachingAllocator(CachingAllocatorOptions options, EventSink sink)
    : options_(options), sink_(std::move(sink)) {
  options_.device_base = RoundUp(options_.device_base, kSegmentAlignment);
  next_device_address_ = options_.device_base;
}

uint64_t CachingAllocator::RoundSize(uint64_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return RoundUp(bytes, kMinBlockSize);
}

bool CachingAllocator::IsSmallRequest(uint64_t rounded_bytes) {
  return rounded_bytes <= kSmallSize;
}

uint64_t CachingAllocator::SegmentSizeFor(uint64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSize) return kSmallBuffer;
  if (rounded_bytes < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded_bytes, kRoundLarge);
}

void CachingAllocator::Emit(EventKind kind, uint64_t address, uint64_t size, uint8_t cause) {
  if (!sink_) return;
  Event event;
  event.kind = kind;
  event.address = address;
  event.size = size;
  event.cause = cause;
  sink_(event);
}

bool CachingAllocator::ShouldSplit(const Block& block, uint64_t rounded) const {
  const uint64_t remaining = block.size - rounded;
  if (block.small) return remaining >= kMinBlockSize;
  return rounded < options_.max_split_size && remaining > kSmallSize;
}

bool CachingAllocator::FindFreeBlock(bool small, uint64_t rounded,
                                     uint64_t& address) const {
  const FreePool& pool = PoolOf(small);
  // The pool is ordered by (size, address): the first entry not below
  // (rounded, 0) is the smallest fitting block at the lowest address.
  auto it = pool.lower_bound({rounded, 0});
  if (it == pool.end()) return false;
  const uint64_t size = it->first;
  // Rule 6. Because the pool is size-ordered, rejecting the best fit rejects
  // every later candidate too, which is why PyTorch looks no further.
  const uint64_t max_split = options_.max_split_size;
  if (rounded < max_split && size >= max_split) return false;
  if (rounded >= max_split && size >= rounded + kLargeBuffer) return false;
  address = it->second;
  return true;
}

absl::StatusOr<bool> CachingAllocator::TryReserveSegment(uint64_t size, bool small,
                                                         uint64_t& address) {
  if (options_.reserve_limit != 0 &&
      stats_.reserved_bytes + size > options_.reserve_limit) {
    return false;
  }
  if (next_device_address_ > std::numeric_limits<uint64_t>::max() - size) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "caching allocator: the modelled device address range starting at %#x is "
        "exhausted; cannot reserve another %s segment",
        options_.device_base, FormatBytes(size)));
  }
  address = next_device_address_;
  next_device_address_ += size;  // size is a multiple of 2 MiB: stays aligned
  segments_[address] = Segment{size, small};
  blocks_[address] = Block{size, address, small, /*allocated=*/false, 0};
  PoolOf(small).insert({size, address});
  stats_.reserved_bytes += size;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  ++stats_.segment_count;
  ++stats_.device_mallocs;
  Emit(EventKind::kAlloc, address, size);
  return true;
}

void CachingAllocator::ReleaseSegment(uint64_t address) {
  auto segment = segments_.find(address);
  const Segment released = segment->second;
  PoolOf(released.small).erase({released.size, address});
  blocks_.erase(address);
  segments_.erase(segment);
  stats_.reserved_bytes -= released.size;
  --stats_.segment_count;
  ++stats_.device_frees;
  Emit(EventKind::kFree, address, released.size);
}

uint64_t CachingAllocator::ReleaseFreeSegments(bool small) {
  // A segment is entirely free when its first block is free and spans it.
  // Collect first, release after: releasing edits the pool being walked.
  std::vector<uint64_t> releasable;
  for (const auto& [size, address] : PoolOf(small)) {
    auto segment = segments_.find(address);
    if (segment != segments_.end() && segment->second.size == size) {
      releasable.push_back(address);
    }
  }
  uint64_t released = 0;
  for (uint64_t address : releasable) {
    released += segments_.at(address).size;
    ReleaseSegment(address);
  }
  return released;
}

bool CachingAllocator::ReleaseOversizeSegments(bool small, uint64_t rounded) {
  const uint64_t max_split = options_.max_split_size;
  if (max_split == std::numeric_limits<uint64_t>::max()) return false;
  const uint64_t wanted = std::max(rounded, max_split);
  // Cached whole segments of oversize blocks, in (size, address) order.
  std::vector<std::pair<uint64_t, uint64_t>> oversize;
  for (const auto& [size, address] : PoolOf(small)) {
    auto segment = segments_.find(address);
    if (size >= max_split && segment != segments_.end() &&
        segment->second.size == size) {
      oversize.push_back({size, address});
    }
  }
  auto single = std::lower_bound(oversize.begin(), oversize.end(),
                                 std::pair<uint64_t, uint64_t>{wanted, 0});
  if (single != oversize.end()) {
    ReleaseSegment(single->second);
    return true;
  }
  // No single one is big enough: release the largest ones until enough is.
  uint64_t released = 0;
  for (auto it = oversize.rbegin(); it != oversize.rend() && released < wanted; ++it) {
    released += it->first;
    ReleaseSegment(it->second);
  }
  return released >= wanted;
}

absl::StatusOr<AllocatedBlock> CachingAllocator::Allocate(uint64_t bytes,
                                                        std::optional<TensorRole> role) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "caching allocator: a zero-byte allocation has no block; skip it");
  }
  if (bytes > kLargestRequest) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "caching allocator: cannot allocate %s: larger than any modelled device",
        FormatBytes(bytes)));
  }
  const uint64_t rounded = RoundSize(bytes);
  const bool small = IsSmallRequest(rounded);

  uint64_t address = 0;
  if (!FindFreeBlock(small, rounded, address)) {
    const uint64_t segment_size = SegmentSizeFor(rounded);
    absl::StatusOr<bool> reserved = TryReserveSegment(segment_size, small, address);
    if (reserved.ok() && !*reserved && ReleaseOversizeSegments(small, rounded)) {
      ++stats_.alloc_retries;
      reserved = TryReserveSegment(segment_size, small, address);
    }
    if (reserved.ok() && !*reserved) {
      ReleaseFreeSegments(/*small=*/false);
      ReleaseFreeSegments(/*small=*/true);
      ++stats_.alloc_retries;
      reserved = TryReserveSegment(segment_size, small, address);
    }
    if (!reserved.ok()) return reserved.status();
    if (!*reserved) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "caching allocator: out of memory: tried to allocate %s, which needs a "
          "new %s segment; %s is reserved of a %s limit, %s of it allocated to "
          "tensors and the rest cached in partly used segments. Raise the "
          "reserve limit or shrink the workload",
          FormatBytes(bytes), FormatBytes(segment_size),
          FormatBytes(stats_.reserved_bytes), FormatBytes(options_.reserve_limit),
          FormatBytes(stats_.allocated_bytes)));
    }
  }

  Block& block = blocks_.at(address);
  PoolOf(small).erase({block.size, address});
  if (ShouldSplit(block, rounded)) {
    // The request takes the front; the remainder stays cached.
    const Block remainder{block.size - rounded, block.segment, small, false, 0};
    block.size = rounded;
    blocks_[address + rounded] = remainder;
    PoolOf(small).insert({remainder.size, address + rounded});
  }
  block.allocated = true;

  stats_.allocated_bytes += block.size;
  stats_.requested_bytes += bytes;
  stats_.peak_allocated_bytes =
      std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  ++stats_.active_block_count;
  block.requested = bytes;
  Emit(EventKind::kActivate, address, block.size, role.has_value() ? ActivateCause(*role) : 0);
  return AllocatedBlock{address, block.size};
}

absl::Status CachingAllocator::Free(uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end() || !it->second.allocated) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "caching allocator: free of %#x, which is not the start of an allocated "
        "block (double free, or an address Allocate() did not return)",
        address));
  }
  const uint64_t segment = it->second.segment;
  const bool small = it->second.small;
  const uint64_t size = it->second.size;
  it->second.allocated = false;
  stats_.allocated_bytes -= size;
  stats_.requested_bytes -= it->second.requested;
  it->second.requested = 0;
  --stats_.active_block_count;
  Emit(EventKind::kDeactivate, address, size);

  FreePool& pool = PoolOf(small);
  // Merge with the next block, then with the previous one, when they are
  // free and in the same segment (segments are not contiguous in PyTorch).
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.segment == segment &&
      !next->second.allocated) {
    pool.erase({next->second.size, next->first});
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.segment == segment && !prev->second.allocated) {
      pool.erase({prev->second.size, prev->first});
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  pool.insert({it->second.size, it->first});
  return absl::OkStatus();
}

uint64_t CachingAllocator::EmptyCache() {
  const uint64_t released = ReleaseFreeSegments(/*small=*/false);
  return released + ReleaseFreeSegments(/*small=*/true);
}

absl::Status CachingAllocator::CheckConsistency() const {
  uint64_t reserved = 0, allocated = 0, active = 0, free_blocks = 0;
  auto block = blocks_.begin();
  for (const auto& [start, segment] : segments_) {
    if (start % kSegmentAlignment != 0) {
      return absl::InternalError(absl::StrFormat("segment %#x is not 2 MiB aligned", start));
    }
    reserved += segment.size;
    uint64_t cursor = start;
    bool previous_free = false;
    while (cursor < start + segment.size) {
      if (block == blocks_.end() || block->first != cursor) {
        return absl::InternalError(
            absl::StrFormat("segment %#x: no block starts at %#x", start, cursor));
      }
      const Block& b = block->second;
      if (b.segment != start || b.small != segment.small || b.size == 0) {
        return absl::InternalError(absl::StrFormat("block %#x: bad header", cursor));
      }
      if (b.allocated) {
        allocated += b.size;
        ++active;
      } else {
        if (previous_free) {
          return absl::InternalError(
              absl::StrFormat("block %#x: free neighbours left unmerged", cursor));
        }
        if (PoolOf(b.small).count({b.size, cursor}) == 0) {
          return absl::InternalError(
              absl::StrFormat("free block %#x is missing from its pool", cursor));
        }
        ++free_blocks;
      }
      previous_free = !b.allocated;
      cursor += b.size;
      ++block;
    }
    if (cursor != start + segment.size) {
      return absl::InternalError(
          absl::StrFormat("segment %#x: blocks overrun its end", start));
    }
  }
  if (block != blocks_.end()) {
    return absl::InternalError("blocks exist outside every segment");
  }
  if (free_blocks != small_free_.size() + large_free_.size()) {
    return absl::InternalError("the free pools hold blocks that are not free");
  }
  if (reserved != stats_.reserved_bytes || allocated != stats_.allocated_bytes ||
      active != stats_.active_block_count ||
      segments_.size() != stats_.segment_count) {
    return absl::InternalError("the counters disagree with the blocks");
  }
  return absl::OkStatus();
}

}  // namespace umlab
