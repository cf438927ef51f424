// A map from 2 MB block numbers to small dense indices, for the engine's
// per-block records. Block numbers of one program cluster in a few address
// ranges (the allocator's segments), so the map is two levels: a hash map of
// chunks of 4096 consecutive blocks (8 GiB of address space each), and a
// flat array inside a chunk. Lookups on the hot path hit the same chunk as
// the previous one and cost an array access; a plain hash map cost 8% of a
// deepum run.
#ifndef UMLAB_CORE_BLOCK_INDEX_H_
#define UMLAB_CORE_BLOCK_INDEX_H_

#include <array>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "core/memory_units.h"

namespace umlab {

class BlockIndex {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  // The index of `block`, or kAbsent.
  uint32_t Find(BlockNumber block) const {
    const Chunk* chunk = FindChunk(block >> kChunkBits);
    return chunk == nullptr ? kAbsent : (*chunk)[block & kChunkMask];
  }

  // The slot for `block`, kAbsent until the caller stores an index.
  uint32_t& Slot(BlockNumber block) {
    const uint64_t key = block >> kChunkBits;
    Chunk* chunk = FindChunk(key);
    if (chunk == nullptr) {
      auto created = std::make_unique<Chunk>();
      created->fill(kAbsent);
      chunk = created.get();
      chunks_.emplace(key, std::move(created));
      cached_key_ = key;
      cached_chunk_ = chunk;
    }
    return (*chunk)[block & kChunkMask];
  }

 private:
  static constexpr int kChunkBits = 12;
  static constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
  using Chunk = std::array<uint32_t, size_t{1} << kChunkBits>;

  Chunk* FindChunk(uint64_t key) const {
    if (key == cached_key_) return cached_chunk_;
    auto it = chunks_.find(key);
    if (it == chunks_.end()) return nullptr;
    cached_key_ = key;
    cached_chunk_ = it->second.get();
    return cached_chunk_;
  }

  // Chunks are heap-allocated so that the cached pointer survives rehashing.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Chunk>> chunks_;
  mutable uint64_t cached_key_ = UINT64_MAX;
  mutable Chunk* cached_chunk_ = nullptr;
};

}  // namespace umlab

#endif  // UMLAB_CORE_BLOCK_INDEX_H_
