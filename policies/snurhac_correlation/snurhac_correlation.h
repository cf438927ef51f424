// `snurhac-correlation`: SnuRHAC's correlation prefetching (DeepUM thesis
// §6.5.2), the pair-based scheme of §5.2.1 on pages: one table per device,
// fed by that device's faulted pages in the order they were fetched. Each
// miss is filed as a successor of the misses before it, the last one on
// level 0, the one before on level 1, and so on; a miss prefetches every
// successor the table holds for it, on every level (Figure 5.2(b)).
//
// The defaults are §7.3.2's: 64k rows, 4-way, 3 levels, 4 successors ("the
// size of a table is approximately 12MB"; Table 7.12's Config5, which
// Figure 7.11 found best). The table is core/correlation_table.h, the one
// DeepUM's block tables use.
//
// In SnuRHAC the driver uses this only for blocks without the read-only
// flag; faults on read-only blocks fetch their whole block instead
// (adjacent-page prefetching). That split is the cluster sim's
// (emu/snurhac/cluster_sim.h), which shows this policy only the faults on
// blocks without the flag. On a single device (the sim, uffd and cuda
// backends) it sees every fault.
#ifndef UMLAB_POLICIES_SNURHAC_CORRELATION_SNURHAC_CORRELATION_H_
#define UMLAB_POLICIES_SNURHAC_CORRELATION_SNURHAC_CORRELATION_H_

#include <cstdint>
#include <deque>

#include "core/correlation_table.h"
#include "core/policy.h"

namespace umlab {

class SnurhacCorrelationPolicy final : public Policy {
 public:
  SnurhacCorrelationPolicy(const CorrelationShape& shape, TableSizing sizing);

  void OnFaultBatch(const FaultBatch& batch) override;
  uint64_t TableBytes() const override { return sizeof(*this) + table_.HeapBytes(); }
  void ReportStats(PolicyStats& out) const override;

  const CorrelationTable& table() const { return table_; }

 private:
  // One miss: prefetches its successors, then files it after the misses
  // before it.
  void OnMiss(PageNumber page);

  CorrelationTable table_;
  std::deque<PageNumber> recent_;  // the last NumLevels misses, newest first

  uint64_t misses_ = 0;
  uint64_t pages_requested_ = 0;  // successors asked for, resident or not
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_SNURHAC_CORRELATION_SNURHAC_CORRELATION_H_
