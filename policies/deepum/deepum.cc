#include "policies/deepum/deepum.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace umlab {
namespace {

// Heap bytes of an absl flat_hash_map: one slot and one control byte per
// slot of capacity, plus the cloned control group (16 bytes) at the end.
template <typename Map>
uint64_t HashMapBytes(const Map& map) {
  if (map.capacity() == 0) return 0;
  return map.capacity() * (sizeof(typename Map::value_type) + 1) + 16;
}

}  // namespace

// ---------------------------------------------------------------------------
// Execution-id table.

void ExecutionTable::Record(const KernelHistory& history, uint32_t next) {
  std::vector<Entry>& records = entries_[history[3]];
  const std::array<uint32_t, 3> before = {history[0], history[1], history[2]};
  for (Entry& record : records) {
    if (record.before == before) {
      record.next = next;
      return;
    }
  }
  // Unbounded per id (§4.2): a mispredicted kernel is expensive, a record is
  // sixteen bytes.
  records.push_back(Entry{before, next});
  ++total_records_;
}

std::optional<uint32_t> ExecutionTable::Predict(const KernelHistory& history) const {
  auto it = entries_.find(history[3]);
  if (it == entries_.end()) return std::nullopt;
  const std::array<uint32_t, 3> before = {history[0], history[1], history[2]};
  for (const Entry& record : it->second) {
    if (record.before == before) return record.next;
  }
  return std::nullopt;
}

size_t ExecutionTable::records(uint32_t exec_id) const {
  auto it = entries_.find(exec_id);
  return it == entries_.end() ? 0 : it->second.size();
}

uint64_t ExecutionTable::Bytes() const {
  uint64_t bytes = sizeof(*this) + HashMapBytes(entries_);
  for (const auto& [id, records] : entries_) bytes += records.capacity() * sizeof(Entry);
  return bytes;
}

// ---------------------------------------------------------------------------
// The policy.

DeepUmPolicy::DeepUmPolicy(const DeepUmOptions& options) : options_(options) {}

const BlockTable* DeepUmPolicy::block_table(uint32_t exec_id) const {
  auto it = block_tables_.find(exec_id);
  return it == block_tables_.end() ? nullptr : it->second.get();
}

BlockTable& DeepUmPolicy::TableFor(uint32_t exec_id) {
  std::unique_ptr<BlockTable>& table = block_tables_[exec_id];
  if (table == nullptr) {
    table = std::make_unique<BlockTable>(options_.rows, options_.assoc, options_.succs,
                                         options_.sizing);
  }
  return *table;
}

uint64_t DeepUmPolicy::TableBytes() const {
  // Everything the tables allocate: the execution table, the id -> block
  // table map, and each block table with its rows.
  uint64_t bytes = execution_table_.Bytes() + HashMapBytes(block_tables_);
  for (const auto& [id, table] : block_tables_) bytes += table->Bytes();
  return bytes;
}

std::vector<uint32_t> DeepUmPolicy::PredictedKernels() const {
  std::vector<uint32_t> kernels;
  for (const WindowKernel& kernel : window_) kernels.push_back(kernel.history[3]);
  return kernels;
}

// --- Recording: the correlator thread ---------------------------------------

void DeepUmPolicy::OnKernelBegin(uint32_t exec_id) {
  // The kernel that just ended, with the three before it, led to this one.
  if (history_[3] != 0) execution_table_.Record(history_, exec_id);
  history_ = {history_[1], history_[2], history_[3], exec_id};
  // §6.2, Table 4: a block table is allocated when a new execution id shows up.
  TableFor(exec_id);
  kernel_running_ = true;
  first_fault_.reset();
  last_fault_.reset();

  if (!window_.empty() && window_.front().history[3] != exec_id) {
    // A failed prediction ends chaining; what it queued is for kernels that
    // are not coming.
    ++mispredictions_;
    AbortChain();
  }
  MaybePreEvict();
}

void DeepUmPolicy::OnKernelEnd(uint32_t exec_id) {
  // The end block is the last fault before the execution-id transition (§4.2).
  // A kernel that did not fault this time keeps what it learned before.
  if (kernel_running_ && last_fault_.has_value()) TableFor(exec_id).end = *last_fault_;
  kernel_running_ = false;
  if (!window_.empty() && window_.front().history[3] == exec_id) PopWindowFront();
  // Chaining paused with N kernels queued ahead; now one more fits.
  if (chaining_) ExtendChain();
  MaybePreEvict();
}

void DeepUmPolicy::RecordFault(BlockNumber block) {
  BlockTable& table = TableFor(history_[3]);
  if (!first_fault_.has_value()) {
    // The start block is the first fault after the transition (§4.2).
    first_fault_ = block;
    table.start = block;
  } else {
    table.Insert(*last_fault_, block);
  }
  last_fault_ = block;
}

void DeepUmPolicy::OnFaultBatch(const FaultBatch& batch) {
  if (!kernel_running_ || history_[3] == 0) return;
  // The raw entries keep arrival order, which is the order the kernel
  // reached the blocks in; the grouped list is in address order.
  std::optional<BlockNumber> first_in_batch;
  for (const FaultEntry& entry : batch.raw) {
    const BlockNumber block = BlockOfPage(entry.page);
    if (last_fault_.has_value() && *last_fault_ == block) continue;
    RecordFault(block);
    if (!first_in_batch.has_value()) first_in_batch = block;
  }
  // A new fault ends the chain in progress and starts one from the fault.
  if (first_in_batch.has_value()) StartChain(*first_in_batch);
  MaybePreEvict();
}

// --- Chaining: the prefetching thread ---------------------------------------

PageMask DeepUmPolicy::ExpandFault(BlockNumber /*block*/, const PageMask& /*faulted*/) {
  // DeepUM moves UM blocks, not pages (§4.2): the migration thread brings the
  // whole faulted block.
  return FullPageMask();
}

void DeepUmPolicy::StartChain(BlockNumber block) {
  AbortChain();
  chaining_ = true;
  window_.push_back(WindowKernel{history_, {}});
  WalkKernel(window_.back(), block);
  ExtendChain();
}

void DeepUmPolicy::AbortChain() {
  if (chaining_ || !window_.empty()) ++chain_aborts_;
  chaining_ = false;
  context().CancelPrefetches();
  while (!window_.empty()) PopWindowFront();
}

void DeepUmPolicy::ExtendChain() {
  while (chaining_ && window_.size() < static_cast<size_t>(options_.lookahead) + 1) {
    if (window_.empty()) {
      chaining_ = false;
      return;
    }
    const KernelHistory& last = window_.back().history;
    const std::optional<uint32_t> next = execution_table_.Predict(last);
    if (!next.has_value()) {
      // Failing to predict the next kernel ends chaining (§4.2); what is
      // queued stays queued.
      chaining_ = false;
      return;
    }
    ++kernels_predicted_;
    window_.push_back(WindowKernel{{last[1], last[2], last[3], *next}, {}});
    const BlockTable* table = block_table(*next);
    if (table != nullptr && table->start.has_value()) {
      WalkKernel(window_.back(), *table->start);
    }
  }
}

void DeepUmPolicy::WalkKernel(WindowKernel& kernel, BlockNumber origin) {
  const uint32_t exec_id = kernel.history[3];
  const BlockTable* table = block_table(exec_id);
  // Breadth first over the successors: the most recent successor of each
  // block comes first. A kernel's table holds at most rows x assoc blocks.
  walk_queue_.clear();
  ++walk_number_;
  walk_queue_.push_back(origin);
  walk_seen_[origin] = walk_number_;
  const size_t limit = table == nullptr ? 1 : static_cast<size_t>(table->capacity()) + 1;
  for (size_t head = 0; head < walk_queue_.size(); ++head) {
    const BlockNumber block = walk_queue_[head];
    context().Prefetch(block, FullPageMask(), exec_id);
    ++blocks_queued_;
    kernel.blocks.push_back(block);
    ++predicted_[block];
    // Meeting the end block ends prefetching for this kernel (§4.2).
    if (table == nullptr || (table->end.has_value() && block == *table->end)) break;
    for (BlockNumber successor : table->Successors(block)) {
      if (walk_queue_.size() >= limit) break;
      uint64_t& seen = walk_seen_[successor];
      if (seen != walk_number_) {
        seen = walk_number_;
        walk_queue_.push_back(successor);
      }
    }
  }
}

void DeepUmPolicy::PopWindowFront() {
  for (BlockNumber block : window_.front().blocks) {
    auto it = predicted_.find(block);
    if (it != predicted_.end() && --it->second == 0) {
      predicted_.erase(it);
      ++window_shrinks_;
    }
  }
  window_.pop_front();
}

// --- Eviction: pre-eviction and invalidation --------------------------------

std::optional<BlockNumber> DeepUmPolicy::UnpredictedVictim(
    std::optional<BlockNumber> except) const {
  const MemoryView& memory = context().memory();
  auto eligible = [&](const BlockState& state) { return !predicted_.contains(state.number); };
  // When the window covers the whole device, every search fails, and each
  // walks every resident block: remember that, until a block may have
  // become evictable or one left the window. Only the block the failed
  // search excepted can have been eligible.
  if (failed_search_.has_value() &&
      failed_search_->generation == memory.evictable_generation() &&
      failed_search_->window_shrinks == window_shrinks_) {
    const std::optional<BlockNumber> only = failed_search_->excepted;
    if (!only.has_value() || only == except) return std::nullopt;
    const BlockState* state = memory.Find(*only);
    if (state != nullptr && state->Evictable() && eligible(*state)) return only;
    return std::nullopt;
  }
  std::optional<BlockNumber> victim = memory.LeastRecentlyMigrated(eligible, except);
  if (!victim.has_value()) {
    failed_search_ = FailedSearch{memory.evictable_generation(), window_shrinks_, except};
  }
  return victim;
}

std::optional<BlockNumber> DeepUmPolicy::ChooseVictim(const VictimQuery& query) {
  // deepum-prefetch leaves eviction to the driver (least recently migrated).
  if (!options_.pre_evict) return Policy::ChooseVictim(query);
  if (std::optional<BlockNumber> victim = UnpredictedVictim(query.for_block)) return victim;
  // Every evictable block is wanted by the current kernel or the next N.
  // A prefetch is not worth evicting one of them; a fault has to be served.
  if (query.reason == VictimReason::kPrefetch) return std::nullopt;
  return Policy::ChooseVictim(query);
}

void DeepUmPolicy::MaybePreEvict() {
  if (!options_.pre_evict) return;
  const MemoryView& memory = context().memory();
  // §5.1: pre-evict when no free device memory is left.
  if (memory.free_frames() > 0) {
    pending_pre_eviction_.reset();
    return;
  }
  if (pending_pre_eviction_.has_value()) {
    const BlockState* state = memory.Find(*pending_pre_eviction_);
    if (state != nullptr && state->Evictable()) return;  // still on its way out
    pending_pre_eviction_.reset();
  }
  const std::optional<BlockNumber> victim = UnpredictedVictim(std::nullopt);
  if (!victim.has_value()) return;
  context().PreEvict(*victim);
  pending_pre_eviction_ = victim;
  ++pre_evictions_;
}

void DeepUmPolicy::OnFreeSpaceChanged(uint64_t /*free_frames*/) { MaybePreEvict(); }

void DeepUmPolicy::OnEvicted(BlockNumber block, const PageMask& /*pages*/) {
  if (pending_pre_eviction_ == block) pending_pre_eviction_.reset();
}

PageMask DeepUmPolicy::PagesToDrop(const BlockState& victim) {
  // §5.2: bytes the allocator holds as free are garbage; dropping them saves
  // the write-back. Active pages of the same block are written back as usual.
  if (!options_.invalidate) return PageMask();
  const PageMask drop = victim.inactive & victim.resident;
  invalidated_pages_ += drop.count();
  return drop;
}

void DeepUmPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("kernels_predicted", kernels_predicted_);
  out.AddCount("mispredictions", mispredictions_);
  out.AddCount("chain_aborts", chain_aborts_);
  out.AddCount("blocks_queued", blocks_queued_);
  out.AddCount("pre_evictions", pre_evictions_);
  out.AddCount("invalidated_pages", invalidated_pages_);
  out.AddCount("block_tables", block_tables_.size());
}

// ---------------------------------------------------------------------------
// Registration: the full policy and the two ablation presets share one
// parameter list and one factory.

namespace {

std::vector<ParamInfo> DeepUmParams() {
  return {
      {"rows", ParamType::kInt, "2048", "rows of each UM-block correlation table (NumRows)",
       ParamRange::Closed(1, 1 << 22)},
      {"assoc", ParamType::kInt, "2", "ways per row (Assoc)", ParamRange::Closed(1, 64)},
      {"succs", ParamType::kInt, "4", "successors kept per block, MRU order (NumSuccs)",
       ParamRange::Closed(1, 64)},
      {"table_sizing", ParamType::kString, "grow",
       "grow: each UM-block table doubles its rows, up to `rows`, as its kernel's faults "
       "need them (same predictions, memory as in the paper's Table 4); fixed: all `rows` "
       "rows allocated up front",
       {},
       {"grow", "fixed"}},  // TableSizing's order
      {"n", ParamType::kInt, "16",
       "kernels prefetched ahead of the current one before chaining pauses (the paper's N)",
       ParamRange::Closed(0, 4096)},
  };
}

absl::StatusOr<std::unique_ptr<Policy>> MakeDeepUm(const ParamMap& params, bool pre_evict,
                                                   bool invalidate) {
  DeepUmOptions options;
  options.pre_evict = pre_evict;
  options.invalidate = invalidate;
  const int64_t rows = params.Int("rows"), assoc = params.Int("assoc");
  const int64_t succs = params.Int("succs"), lookahead = params.Int("n");
  options.sizing = static_cast<TableSizing>(params.Choice("table_sizing"));
  options.rows = static_cast<int>(rows);
  options.assoc = static_cast<int>(assoc);
  options.succs = static_cast<int>(succs);
  options.lookahead = static_cast<int>(lookahead);
  return std::make_unique<DeepUmPolicy>(options);
}

}  // namespace

UMLAB_REGISTER_POLICY(
    deepum, {"deepum",
             "DeepUM (ASPLOS '23): correlation prefetching with chaining, pre-eviction, "
             "invalidation of inactive allocator blocks",
             DeepUmParams(), [](const ParamMap& params) {
               return MakeDeepUm(params, /*pre_evict=*/true, /*invalidate=*/true);
             }});
UMLAB_REGISTER_POLICY(
    deepum_prefetch,
    {"deepum-prefetch",
     "DeepUM ablation: correlation prefetching only (eviction as the driver does it)",
     DeepUmParams(), [](const ParamMap& params) {
       return MakeDeepUm(params, /*pre_evict=*/false, /*invalidate=*/false);
     }});
UMLAB_REGISTER_POLICY(
    deepum_preevict,
    {"deepum-preevict", "DeepUM ablation: correlation prefetching and pre-eviction",
     DeepUmParams(), [](const ParamMap& params) {
       return MakeDeepUm(params, /*pre_evict=*/true, /*invalidate=*/false);
     }});

}  // namespace umlab
