// `deepum`: DeepUM (Jung et al., ASPLOS '23; Jung's thesis ch. 5) as
// published, on the engine's hooks. Three mechanisms:
//
//  1. Correlation prefetching (§4.2). Two kinds of table, one level each:
//     - the execution-id table: per execution id, every record
//       (e-3, e-2, e-1, next) seen so far, unbounded, to predict the kernel
//       that follows the current one;
//     - one UM-block table per execution id: up to NumRows rows x Assoc ways,
//       each way a faulted block with its NumSuccs most recent successor
//       faults in MRU order, plus the kernel's start block (its first fault
//       after the execution-id transition) and end block (its last fault
//       before it). A table grows with the blocks its kernel faults on
//       (TableSizing::kGrow), which is how the paper's table memory (§6.2,
//       Table 4) depends on the batch size; docs/policies.md has the reading.
//     On a fault the prefetcher walks the current kernel's table from the
//     faulted block; at the end block it predicts the next kernel and goes on
//     from that kernel's start block ("chaining"). It pauses once the current
//     kernel and the next N are queued, resumes when a kernel ends, and stops
//     on a new fault (which restarts it from the faulted block) or when the
//     next kernel cannot be predicted or was predicted wrong.
//  2. Pre-eviction (§5.1). When no device frame is free, evict ahead of need
//     the least recently migrated block not predicted for the current kernel
//     or the next N.
//  3. Invalidation (§5.2). A victim's pages that the allocator reports
//     inactive are dropped rather than written back.
//
// The presets `deepum-prefetch` (1 only) and `deepum-preevict` (1 and 2) are
// the ablation steps of the paper's Figure 10; `deepum` has all three.
#ifndef UMLAB_POLICIES_DEEPUM_DEEPUM_H_
#define UMLAB_POLICIES_DEEPUM_DEEPUM_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "core/correlation_table.h"
#include "core/policy.h"

namespace umlab {

struct DeepUmOptions {
  // The paper's best UM-block table (§6.3, Config9): 2048 rows, 2-way, 4
  // successors.
  int rows = 2048;
  int assoc = 2;
  int succs = 4;
  // Kernels prefetched ahead of the current one (the paper's N, §6.2). 16
  // measured best on mlp at half capacity (docs/policies.md); the paper's
  // sweet spot on its models was 32.
  int lookahead = 16;
  TableSizing sizing = TableSizing::kGrow;
  bool pre_evict = true;
  bool invalidate = true;
};

// The last four kernels, oldest first: (e-3, e-2, e-1, current).
using KernelHistory = std::array<uint32_t, 4>;

// The execution-id correlation table (§4.2, Figure 6).
class ExecutionTable {
 public:
  // `next` ran right after `history`: files (e-3, e-2, e-1, next) under the
  // entry of history[3]. A context seen before gets its newest successor.
  void Record(const KernelHistory& history, uint32_t next);
  // The kernel that followed this exact history last time, if any.
  std::optional<uint32_t> Predict(const KernelHistory& history) const;

  size_t records(uint32_t exec_id) const;
  uint64_t Bytes() const;

 private:
  struct Entry {
    std::array<uint32_t, 3> before;
    uint32_t next;
  };
  absl::flat_hash_map<uint32_t, std::vector<Entry>> entries_;
  size_t total_records_ = 0;
};

// One execution id's UM-block correlation table (§4.1-4.2, Figures 5 and 7):
// a single-level correlation table of blocks (core/correlation_table.h),
// with the kernel's start and end blocks that chaining follows.
class BlockTable : public CorrelationTable {
 public:
  // `rows` is NumRows: all of it under kFixed, the bound under kGrow.
  BlockTable(int rows, int assoc, int succs, TableSizing sizing = TableSizing::kFixed)
      : CorrelationTable(CorrelationShape{rows, assoc, succs, 1}, sizing) {}

  // `successor` faulted right after `block` in this kernel: it becomes the
  // most recent successor of `block`.
  void Insert(BlockNumber block, BlockNumber successor) {
    CorrelationTable::Insert(block, successor);
  }
  // Successors of `block`, most recent first; empty when it has no way.
  absl::Span<const BlockNumber> Successors(BlockNumber block) const {
    return CorrelationTable::Successors(block);
  }

  std::optional<BlockNumber> start;  // first fault after the kernel began
  std::optional<BlockNumber> end;    // last fault before it ended

  // Bytes allocated: this object and its rows.
  uint64_t Bytes() const { return sizeof(*this) + HeapBytes(); }
  // The heap bytes of `rows` rows of this shape.
  static uint64_t RowBytes(int rows, int assoc, int succs) {
    return CorrelationTable::RowBytes(rows, CorrelationShape{rows, assoc, succs, 1});
  }
};

class DeepUmPolicy final : public Policy {
 public:
  explicit DeepUmPolicy(const DeepUmOptions& options);

  void OnFaultBatch(const FaultBatch& batch) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnKernelEnd(uint32_t exec_id) override;
  void OnEvicted(BlockNumber block, const PageMask& pages) override;
  void OnFreeSpaceChanged(uint64_t free_frames) override;

  PageMask ExpandFault(BlockNumber block, const PageMask& faulted) override;
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& query) override;
  PageMask PagesToDrop(const BlockState& victim) override;
  uint64_t TableBytes() const override;
  void ReportStats(PolicyStats& out) const override;

  // For tests and reports.
  const ExecutionTable& execution_table() const { return execution_table_; }
  const BlockTable* block_table(uint32_t exec_id) const;
  // Chaining is walking or paused (not stopped).
  bool chaining() const { return chaining_; }
  // The kernels queued for, the current (or next expected) one first.
  std::vector<uint32_t> PredictedKernels() const;
  const DeepUmOptions& options() const { return options_; }
  bool IsPredicted(BlockNumber block) const { return predicted_.contains(block); }
  uint64_t chain_aborts() const { return chain_aborts_; }
  uint64_t mispredictions() const { return mispredictions_; }
  uint64_t pre_evictions() const { return pre_evictions_; }

 private:
  // A kernel in the prefetch window and the blocks queued for it.
  struct WindowKernel {
    KernelHistory history;  // history[3] is this kernel
    std::vector<BlockNumber> blocks;
  };

  BlockTable& TableFor(uint32_t exec_id);
  void RecordFault(BlockNumber block);
  // Starts chaining over from `block`, faulted in the current kernel.
  void StartChain(BlockNumber block);
  // Stops chaining and forgets what was queued and not yet issued.
  void AbortChain();
  // Walks kernels until the window holds the current kernel and N more.
  void ExtendChain();
  // Queues a kernel's blocks, from `origin` to its end block.
  void WalkKernel(WindowKernel& kernel, BlockNumber origin);
  void PopWindowFront();
  void MaybePreEvict();
  std::optional<BlockNumber> UnpredictedVictim(std::optional<BlockNumber> except) const;

  DeepUmOptions options_;
  ExecutionTable execution_table_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<BlockTable>> block_tables_;

  // Recording (the correlator thread).
  KernelHistory history_{};  // kernels begun, the running one last
  bool kernel_running_ = false;
  std::optional<BlockNumber> first_fault_, last_fault_;  // in the running kernel

  // Chaining (the prefetching thread).
  bool chaining_ = false;
  std::deque<WindowKernel> window_;
  absl::flat_hash_map<BlockNumber, uint32_t> predicted_;  // block -> window kernels
  // Blocks that have left predicted_, and the last victim search that found
  // nothing (UnpredictedVictim): while neither it nor the memory's
  // evictable generation moves, no block but `excepted` can be eligible.
  uint64_t window_shrinks_ = 0;
  struct FailedSearch {
    uint64_t generation;
    uint64_t window_shrinks;
    std::optional<BlockNumber> excepted;
  };
  mutable std::optional<FailedSearch> failed_search_;
  std::vector<BlockNumber> walk_queue_;                   // scratch for WalkKernel
  // Scratch for WalkKernel: the walk that last reached each block. Stamping
  // instead of clearing a set keeps the table's memory between walks (a
  // cleared large absl set frees it, and regrowing it cost 7% of a run).
  absl::flat_hash_map<BlockNumber, uint64_t> walk_seen_;
  uint64_t walk_number_ = 0;

  // Pre-eviction: the victim queued and not yet evicted.
  std::optional<BlockNumber> pending_pre_eviction_;

  // Final statistics (ReportStats).
  uint64_t kernels_predicted_ = 0;   // next kernels the execution table named
  uint64_t blocks_queued_ = 0;       // block prefetches the chain walk queued
  uint64_t chain_aborts_ = 0;
  uint64_t mispredictions_ = 0;
  uint64_t pre_evictions_ = 0;
  uint64_t invalidated_pages_ = 0;   // victim pages dropped, not written back
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_DEEPUM_DEEPUM_H_
