// `hum`: HUM, "hidden unified memory" (Jung's thesis, ch. 4): a program
// written with cudaMalloc and cudaMemcpy runs on managed memory with its
// host-to-device copies hidden behind host and kernel computation, with no
// change to its code (docs/hum.md).
//
//   - Every host-to-device copy is hidden (CopyMode::kHidden, §4.5): the
//     host goes on at once; `threads` host threads (8, the thesis's best,
//     §7.1 Fig. 7.3) stage the source in host managed memory 2 MB at a time
//     (§4.6); each copy has its own page migration queue, and the one page
//     migration thread serves the non-empty queues round-robin, a 2 MB
//     chunk at a time (§4.7). The source stays write-protected until its
//     copy lands, and a host write to it waits (§4.3).
//   - A copy starts as soon as it is issued, unless one under way writes
//     its destination (§4.7's overlap check, which the mechanism applies).
//   - A kernel issued right after a hidden copy launches before the copy is
//     done when its arguments depend on it (§4.7's first condition). The
//     other two, the copy started and its destination unmapped from the
//     device since, are the mechanism's: no kernel ever goes before them.
//     Faults on pages the copy has yet to bring wait for it (§4.4).
//   - Device-to-host copies are CUDA's own (the runtime passes them on): DMA
//     at the link's copy rate.
//   - `sched=false` is the thesis's HUM-no-sched (§7.1): no scheduling of
//     copies, so each starts when the one before it is done, and a kernel
//     after several copies can start only once the last has.
//   - A fault on a page no copy brings (a buffer the kernels write) goes to
//     the NVIDIA driver's own fault path, as HUM hands faults on managed
//     memory to it (§4.4): the thesis does not say what HUM's handler does
//     with such pages of cudaMalloc'd buffers, and the driver's tree
//     prefetcher (policies/uvm_default's TreePrefetch) is what UVM would do.
#ifndef UMLAB_POLICIES_HUM_HUM_H_
#define UMLAB_POLICIES_HUM_HUM_H_

#include <cstdint>
#include <optional>

#include "core/policy.h"

namespace umlab {

class HumPolicy final : public Policy {
 public:
  HumPolicy(int threads, bool sched) : threads_(threads), sched_(sched) {}

  CopyMode HowToCopy(const CopyCommand& copy) override {
    return copy.to_device() ? CopyMode::kHidden : CopyMode::kDma;
  }
  int CopyThreads() const override { return threads_; }
  bool StartsCopy(CopyId copy, absl::Span<const CopyId> earlier) override;
  CopyId NextCopyToMigrate(absl::Span<const CopyId> waiting) override;
  bool LaunchesEarly(const EarlyLaunchQuery& query) override;
  PageMask ExpandFault(BlockNumber block, const PageMask& faulted) override;
  void ReportStats(PolicyStats& out) const override;

 private:
  const int threads_;
  const bool sched_;
  // The copy whose queue the migration thread served last.
  std::optional<CopyId> last_served_;
  // Times it moved on to another copy's queue.
  uint64_t queue_switches_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_HUM_HUM_H_
