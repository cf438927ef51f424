// `uvm-default`: what the NVIDIA UVM driver does on its own, the baseline
// every real GPU runs (docs/policies.md; the driver's defaults are in
// docs/devices.md).
//
//   - Tree prefetcher (uvm_perf_prefetch.c). A fault first grows to the 64 KB
//     big page around it. The block's 512 pages are the leaves of a binary
//     tree; a subtree on the path from a faulted page to the root is filled
//     when more than `threshold`% of its pages are resident or faulted. The
//     largest such subtree wins.
//   - Eviction of the least recently *migrated* 2 MB block (the pmm default).
//   - Thrashing detection (uvm_perf_thrashing.c). A migration into the device
//     that comes within `lapse` of the page's previous one is a thrashing
//     event; `thrashing_threshold` consecutive events mark the page thrashing.
//     Thrashing pages are left out of prefetching and of big-page growth, as
//     the driver does.
//
// Prevention. The driver throttles (the faulting processor naps) or pins (the
// page stays where it is and the other processor maps it remotely). Both are
// answers to two processors fighting over a page. Here the only contender is
// eviction pressure, which a nap cannot relieve, and the engine has no remote
// mapping. So this policy pins: the block holding a thrashing page is made
// unevictable for `pin_ns` (the driver's uvm_perf_thrashing_pin, 300 lapses),
// and at most `max_pinned_fraction` of the device frames are pinned at once so
// that pinning can never starve the fault path.
#ifndef UMLAB_POLICIES_UVM_DEFAULT_UVM_DEFAULT_H_
#define UMLAB_POLICIES_UVM_DEFAULT_UVM_DEFAULT_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "core/policy.h"

namespace umlab {

struct UvmDefaultOptions {
  // uvm_perf_prefetch_enable / _threshold / _min_faults.
  bool prefetch = true;
  int threshold_percent = 51;
  int min_faults = 1;
  // The GPU big-page size faults grow to (UVM_PAGE_SIZE_64K).
  int big_page_pages = 16;
  // uvm_perf_thrashing_enable / _threshold / _lapse_usec / _pin (in lapses).
  bool thrashing = true;
  int thrashing_threshold = 3;
  Nanos lapse_ns = 500'000;
  Nanos pin_ns = 300 * 500'000;
  double max_pinned_fraction = 0.25;
};

// The driver's prefetch rule on one block, on its own so tests can check it:
// the pages to migrate for `faulted` given `present` (resident or arriving)
// pages. Thrashing pages neither grow nor seed prefetching.
PageMask TreePrefetch(const PageMask& faulted, const PageMask& present,
                      const PageMask& thrashing, int threshold_percent, int big_page_pages);

class UvmDefaultPolicy final : public Policy {
 public:
  explicit UvmDefaultPolicy(const UvmDefaultOptions& options);

  void OnFaultBatch(const FaultBatch& batch) override;
  void OnMigrated(BlockNumber block, const PageMask& pages, TransferKind kind) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnBlockFreed(BlockNumber block) override;
  PageMask ExpandFault(BlockNumber block, const PageMask& faulted) override;
  void ReportStats(PolicyStats& out) const override;

  // For tests and reports.
  uint64_t thrashing_detections() const { return thrashing_detections_; }
  uint64_t pins() const { return pins_; }
  size_t pinned_blocks() const { return pinned_.size(); }
  PageMask ThrashingPages(BlockNumber block) const;

 private:
  // Per-page thrashing history of one block, created only once the block
  // sees two migrations within a lapse (the driver does the same to save
  // memory).
  struct PageHistory {
    std::array<Nanos, kPagesPerBlock> last_event_ns{};
    std::array<uint8_t, kPagesPerBlock> events{};
    PageMask thrashing;
  };
  struct BlockHistory {
    Nanos last_event_ns = -1;
    uint32_t faulted_pages = 0;  // for min_faults
    std::unique_ptr<PageHistory> pages;
  };
  struct Pin {
    BlockNumber block;
    Nanos until_ns;
  };

  void NoteThrashing(BlockNumber block);
  void ExpirePins();

  UvmDefaultOptions options_;
  absl::flat_hash_map<BlockNumber, BlockHistory> history_;
  // Pins in the order they expire (every pin lasts pin_ns).
  std::deque<Pin> pinned_;
  uint64_t thrashing_detections_ = 0;
  uint64_t pins_ = 0;
  uint64_t tree_prefetch_pages_ = 0;  // pages the prefetcher added to faults
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_UVM_DEFAULT_UVM_DEFAULT_H_
