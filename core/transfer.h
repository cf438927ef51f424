// A migration or eviction the engine asks a backend to carry out.
#ifndef UMLAB_CORE_TRANSFER_H_
#define UMLAB_CORE_TRANSFER_H_

#include <cstdint>

#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

// Also the link priority, highest first: faults > evictions > prefetches.
enum class TransferKind : uint8_t { kFaultMigration = 0, kEviction = 1, kPrefetch = 2 };

const char* TransferKindName(TransferKind kind);

using TransferId = uint64_t;

struct Transfer {
  TransferId id = 0;
  TransferKind kind = TransferKind::kFaultMigration;
  BlockNumber block = 0;
  // Migrations: the pages this makes resident. Evictions: the pages it
  // removes from the device (unmapped as soon as the eviction starts).
  PageMask pages;
  // The subset of `pages` whose bytes really cross the link. Migrations:
  // pages with no valid copy anywhere are zero-filled on the device instead.
  // Evictions: the dirty pages; the rest are dropped.
  PageMask copy;
  // The subset of `copy` that comes from, or goes to, storage rather than
  // host memory (DeviceConfig's storage tier).
  PageMask storage;
  // Evictions: the pages of `pages` the policy drops as garbage
  // (Policy::PagesToDrop). No copy of them is kept anywhere: the next touch
  // finds no data.
  PageMask drop;
  // Do not start before this time (the modelled fault-handling latency).
  Nanos not_before = 0;
  // Id of a transfer that must finish first (0: none), e.g. the eviction
  // that frees this migration's frame or still holds the block's data.
  TransferId after = 0;

  uint64_t copy_bytes() const { return MaskBytes(copy); }
  uint64_t storage_bytes() const { return MaskBytes(storage); }
};

}  // namespace umlab

#endif  // UMLAB_CORE_TRANSFER_H_
