// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// native backend, one device, one stream, default configuration).
//
// DNN workloads allocate every tensor through this model so that the
// addresses, the segment reservations and the "this range is now garbage"
// moments a backend sees are the ones a real PyTorch program would produce.
// DeepUM's invalidation, for one, only works because the allocator reports
// when a block's bytes stop mattering.
//
// The rules, as PyTorch implements them (constants named as in PyTorch):
//
//  1. Rounding. A request is rounded up to a multiple of kMinBlockSize
//     (512 B); requests below 512 B become 512 B. A zero-byte request is an
//     error here (PyTorch hands out a null pointer without touching a pool).
//  2. Pools. A rounded request <= kSmallSize (1 MiB) is served from the small
//     pool, anything larger from the large pool. Blocks never move between
//     pools.
//  3. Best fit. The allocator takes the smallest cached free block of the
//     request's pool whose size is >= the rounded request; among equal sizes,
//     the one at the lowest address.
//  4. New segments ("device malloc"). With no fitting free block, a segment is
//     reserved from the device: 2 MiB (kSmallBuffer) for the small pool;
//     20 MiB (kLargeBuffer) for large requests < 10 MiB (kMinLargeAlloc);
//     otherwise the request rounded up to a multiple of 2 MiB (kRoundLarge).
//     The device is a bump allocator over a virtual range starting at
//     `device_base` (2 MiB aligned), so every segment starts on a 2 MiB
//     boundary. Released ranges are never handed out again: a trace never
//     confuses a new segment with an old one.
//  5. Splitting. The request takes the front of the chosen block. The rest
//     becomes a new free block when it is >= 512 B (small pool) or > 1 MiB
//     (large pool, and only when the request is below max_split_size);
//     otherwise the tensor gets the whole block, slack included.
//  6. Oversize blocks (only with a finite max_split_size, PyTorch's
//     PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb; unlimited by default, as in
//     PyTorch). A request below max_split_size never takes a cached block of
//     size >= max_split_size, and a request at or above it only takes a
//     cached block smaller than request + 20 MiB; such blocks are never split.
//  7. Freeing. A freed block merges with its free neighbours in the same
//     segment and goes back to its pool. Segments stay reserved (cached).
//  8. Pressure. When reserving a segment would take the reserved bytes above
//     `reserve_limit` (PyTorch: set_per_process_memory_fraction, or a real
//     cudaMalloc failure), the allocator (a) with a finite max_split_size,
//     releases cached oversize segments of the request's pool (one big
//     enough, else the largest ones until enough is released) and retries;
//     (b) releases every cached segment that is entirely free, large pool
//     first, each pool in (size, address) order, and retries; (c) fails
//     with ResourceExhausted. Reserved bytes == limit is allowed.
//
// What the model leaves out: multiple streams and their events, CUDA graphs
// and private pools, expandable segments, garbage_collection_threshold and
// roundup_power2_divisions. None of them is on by default in PyTorch.
//
// Events (all addresses and sizes in bytes), in the order they happen:
//   kAlloc(segment start, segment size)  a segment is reserved;
//   kFree(segment start, segment size)   a cached segment is released;
//   kActivate(block, block size)         a block is handed to a tensor;
//   kDeactivate(block, block size)       the tensor frees it: its bytes are
//                                        garbage from now on.
// The activated range is the whole block, which can exceed the request (by
// the 512 B rounding, or by a remainder too small to split off): those slack
// bytes belong to the tensor until it is freed, exactly as in PyTorch.
#ifndef UMLAB_WORKLOADS_ALLOCATOR_CACHING_ALLOCATOR_H_
#define UMLAB_WORKLOADS_ALLOCATOR_CACHING_ALLOCATOR_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/event.h"
#include "core/tensor_role.h"

namespace umlab {

struct CachingAllocatorOptions {
  // Start of the modelled device address range; rounded up to 2 MiB.
  uint64_t device_base = 0x7f0000000000;
  // Most bytes the allocator may hold reserved at once; 0 means no limit.
  uint64_t reserve_limit = 0;
  // Large-pool blocks at or above this size are not split (rule 6).
  // PyTorch's default is unlimited.
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();
};

// Counters in the sense of torch.cuda.memory_stats().
struct CachingAllocatorStats {
  uint64_t reserved_bytes = 0;        // held in segments
  uint64_t allocated_bytes = 0;       // in blocks handed to tensors (rounded)
  uint64_t requested_bytes = 0;       // what the tensors asked for
  uint64_t peak_reserved_bytes = 0;   // the footprint a device must hold
  uint64_t peak_allocated_bytes = 0;
  uint64_t segment_count = 0;         // segments reserved now
  uint64_t active_block_count = 0;    // blocks handed out now
  uint64_t device_mallocs = 0;        // segments ever reserved
  uint64_t device_frees = 0;          // segments ever released
  uint64_t alloc_retries = 0;         // reservations retried after a release
};

// A block handed to a tensor.
struct AllocatedBlock {
  uint64_t address = 0;
  uint64_t size = 0;  // the whole block; >= the request rounded to 512 B
};

class CachingAllocator {
 public:
  static constexpr uint64_t kMinBlockSize = 512;
  static constexpr uint64_t kSmallSize = 1ull << 20;          // 1 MiB
  static constexpr uint64_t kSmallBuffer = 2ull << 20;        // 2 MiB
  static constexpr uint64_t kLargeBuffer = 20ull << 20;       // 20 MiB
  static constexpr uint64_t kMinLargeAlloc = 10ull << 20;     // 10 MiB
  static constexpr uint64_t kRoundLarge = 2ull << 20;         // 2 MiB
  static constexpr uint64_t kSegmentAlignment = 2ull << 20;   // 2 MiB

  // Receives every allocator event as it happens; may be empty.
  using EventSink = std::function<void(const Event&)>;

  explicit CachingAllocator(CachingAllocatorOptions options = {},
                            EventSink sink = nullptr);

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Hands out a block for a tensor of `bytes` bytes (rules 1-6, 8).
  // InvalidArgument for zero bytes; ResourceExhausted when the reserve limit
  // (or the modelled address space) leaves no room. `role`, when known, goes
  // with the block's kActivate event (core/tensor_role.h); PyTorch's
  // allocator does not know it, so it changes nothing else.
  absl::StatusOr<AllocatedBlock> Allocate(uint64_t bytes,
                                          std::optional<TensorRole> role = std::nullopt);

  // Frees the block that starts at `address` (rule 7). InvalidArgument when
  // no block handed out by Allocate() starts there.
  absl::Status Free(uint64_t address);

  // torch.cuda.empty_cache(): releases every cached segment that is entirely
  // free. Returns how many bytes were released.
  uint64_t EmptyCache();

  const CachingAllocatorStats& stats() const { return stats_; }
  const CachingAllocatorOptions& options() const { return options_; }

  // Checks the internal bookkeeping: blocks tile their segments, no two free
  // neighbours are left unmerged, the free pools hold exactly the free
  // blocks, and the counters agree. For tests.
  absl::Status CheckConsistency() const;

  // The sizing rules, exposed so tests and workloads can reason with them.
  static uint64_t RoundSize(uint64_t bytes);              // rule 1
  static bool IsSmallRequest(uint64_t rounded_bytes);     // rule 2
  static uint64_t SegmentSizeFor(uint64_t rounded_bytes); // rule 4

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t segment = 0;  // start address of the segment holding the block
    bool small = false;    // which pool
    bool allocated = false;
    uint64_t requested = 0;  // bytes the tensor asked for, while allocated
  };
  struct Segment {
    uint64_t size = 0;
    bool small = false;
  };
  // Free blocks of one pool ordered for best fit: (size, address).
  using FreePool = std::set<std::pair<uint64_t, uint64_t>>;

  FreePool& PoolOf(bool small) { return small ? small_free_ : large_free_; }
  const FreePool& PoolOf(bool small) const { return small ? small_free_ : large_free_; }
  bool ShouldSplit(const Block& block, uint64_t rounded) const;

  // Best fit in the pool (rules 3 and 6): true and the block's address when
  // a cached block may serve the request.
  bool FindFreeBlock(bool small, uint64_t rounded, uint64_t& address) const;
  // Reserves a segment as one free block in its pool. False when the reserve
  // limit does not allow it; an error when the address range is exhausted.
  absl::StatusOr<bool> TryReserveSegment(uint64_t size, bool small, uint64_t& address);
  // Rule 8a; returns whether enough was released to be worth a retry.
  bool ReleaseOversizeSegments(bool small, uint64_t rounded);
  // Rule 8b for one pool; returns the bytes released.
  uint64_t ReleaseFreeSegments(bool small);
  void ReleaseSegment(uint64_t address);
  void Emit(EventKind kind, uint64_t address, uint64_t size, uint8_t cause = 0);

  CachingAllocatorOptions options_;
  EventSink sink_;
  uint64_t next_device_address_ = 0;
  std::map<uint64_t, Block> blocks_;      // every block of every segment, by address
  std::map<uint64_t, Segment> segments_;  // by start address
  FreePool small_free_;
  FreePool large_free_;
  CachingAllocatorStats stats_;
};

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_ALLOCATOR_CACHING_ALLOCATOR_H_
