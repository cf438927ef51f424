#include "policies/snurhac_correlation/snurhac_correlation.h"

#include <map>
#include <memory>

#include "absl/container/flat_hash_set.h"

namespace umlab {

SnurhacCorrelationPolicy::SnurhacCorrelationPolicy(const CorrelationShape& shape,
                                                   TableSizing sizing)
    : table_(shape, sizing) {}

void SnurhacCorrelationPolicy::OnFaultBatch(const FaultBatch& batch) {
  // Misses in the order the fault buffer holds them, each page once: the
  // buffer's duplicates are one miss.
  absl::flat_hash_set<PageNumber> seen;
  for (const FaultEntry& entry : batch.raw) {
    if (seen.insert(entry.page).second) OnMiss(entry.page);
  }
}

void SnurhacCorrelationPolicy::OnMiss(PageNumber page) {
  ++misses_;
  const int levels = table_.shape().levels;
  // Every successor on every level, gathered per block so that each block
  // gets one request.
  std::map<BlockNumber, PageMask> wanted;
  for (int level = 0; level < levels; ++level) {
    for (uint64_t successor : table_.Successors(page, level)) {
      wanted[BlockOfPage(successor)].set(PageIndexInBlock(successor));
      ++pages_requested_;
    }
  }
  for (const auto& [block, pages] : wanted) {
    context().Prefetch(block, pages, context().current_exec_id());
  }
  for (int level = 0; level < static_cast<int>(recent_.size()); ++level) {
    table_.Insert(recent_[level], page, level);
  }
  recent_.push_front(page);
  if (static_cast<int>(recent_.size()) > levels) recent_.pop_back();
}

void SnurhacCorrelationPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("misses", misses_);
  out.AddCount("successor_pages_requested", pages_requested_);
}

namespace {

absl::StatusOr<std::unique_ptr<Policy>> MakeSnurhacCorrelation(const ParamMap& params) {
  CorrelationShape shape;
  shape.rows = static_cast<int>(params.Int("rows"));
  shape.assoc = static_cast<int>(params.Int("assoc"));
  shape.levels = static_cast<int>(params.Int("levels"));
  shape.succs = static_cast<int>(params.Int("succs"));
  return std::make_unique<SnurhacCorrelationPolicy>(
      shape, static_cast<TableSizing>(params.Choice("table_sizing")));
}

}  // namespace

UMLAB_REGISTER_POLICY(
    snurhac_correlation,
    {"snurhac-correlation",
     "SnuRHAC's dynamic prefetching: a page-level pair-based correlation table per device "
     "(DeepUM thesis §6.5.2)",
     {{"rows", ParamType::kInt, "65536", "rows of the table (NumRows; §7.3.2: 64k)",
       ParamRange::Closed(1, 1 << 22)},
      {"assoc", ParamType::kInt, "4", "ways per row (Assoc; §7.3.2: 4)", ParamRange::Closed(1, 64)},
      {"levels", ParamType::kInt, "3", "levels of successors (NumLevels; §7.3.2: 3)",
       ParamRange::Closed(1, CorrelationTable::kMaxLevels)},
      {"succs", ParamType::kInt, "4", "successors per level, MRU order (NumSuccs; §7.3.2: 4)",
       ParamRange::Closed(1, 64)},
      {"table_sizing",
       ParamType::kString,
       "grow",
       "grow: rows double up to `rows` as the faults need them (same predictions); fixed: all "
       "rows up front",
       {},
       {"grow", "fixed"}}},  // TableSizing's order
     MakeSnurhacCorrelation});

}  // namespace umlab
