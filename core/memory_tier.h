// Where a page's data lives while it is not on the device: host memory, or
// storage behind it (an SSD on the device's PCIe fabric, as in G10).
#ifndef UMLAB_CORE_MEMORY_TIER_H_
#define UMLAB_CORE_MEMORY_TIER_H_

#include <cstdint>

namespace umlab {

enum class MemoryTier : uint8_t { kHost = 0, kStorage = 1 };

inline const char* MemoryTierName(MemoryTier tier) {
  return tier == MemoryTier::kHost ? "host" : "storage";
}

}  // namespace umlab

#endif  // UMLAB_CORE_MEMORY_TIER_H_
