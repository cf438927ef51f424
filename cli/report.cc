#include "cli/report.h"

namespace umlab::cli {
namespace {

template <typename Getter>
double SteadyMean(const RunStats& stats, Getter get) {
  const auto& its = stats.per_iteration;
  if (its.empty()) return 0;
  const size_t first = its.size() > 1 ? 1 : 0;
  double sum = 0;
  for (size_t i = first; i < its.size(); ++i) sum += static_cast<double>(get(its[i]));
  return sum / static_cast<double>(its.size() - first);
}

}  // namespace

const FormatList<Runs>& RunFormats() {
  static const auto* formats = new FormatList<Runs>{
      {"table", "aligned columns to read", RunsTable},
      {"json", "the contract of docs/json-contract.md", RunsJson},
      {"csv", "one row per run", RunsCsv},
  };
  return *formats;
}

Json RunScalars(const RunResult& run) {
  const RunStats& s = run.stats;
  return Json{
      {"policy", run.policy},
      {"backend", run.backend},
      {"workload", run.workload},
      {"device", run.device},
      {"capacity_bytes", run.capacity_bytes},
      {"footprint_bytes", run.footprint_bytes},
      {"iterations", run.iterations},
      {"faults", s.faults},
      {"faulted_pages", s.faulted_pages},
      {"faulted_in_flight_pages", s.faulted_in_flight_pages},
      {"fault_batches", s.fault_batches},
      {"faulted_blocks", s.faulted_blocks},
      {"h2d_bytes", s.h2d_bytes},
      {"d2h_bytes", s.d2h_bytes},
      {"prefetch_bytes", s.prefetch_bytes},
      {"prefetch_useful_bytes", s.prefetch_useful_bytes},
      {"evicted_bytes", s.evicted_bytes},
      {"invalidated_bytes", s.invalidated_bytes},
      {"time_ns", s.time_ns},
      {"stall_ns", s.stall_ns},
      {"ideal_time_ns", s.ideal_time_ns},
      {"launch_ns", s.launch_ns},
      // Beyond the required contract.
      {"dropped_faults", s.dropped_faults},
      {"fault_migrated_bytes", s.fault_migrated_bytes},
      {"zero_filled_bytes", s.zero_filled_bytes},
      {"storage_read_bytes", s.storage_read_bytes},
      {"storage_write_bytes", s.storage_write_bytes},
      {"peak_host_bytes", s.peak_host_bytes},
      {"peak_storage_bytes", s.peak_storage_bytes},
      {"evictions", s.evictions},
      {"device_evictions", s.device_evictions},
      {"pre_evictions", s.pre_evictions},
      {"prefetch_requests", s.prefetch_requests},
      {"prefetches_dropped", s.prefetches_dropped},
      {"peak_used_frames", s.peak_used_frames},
      {"peak_device_bytes", s.peak_device_bytes},
      {"remote_mapped_bytes", s.remote_mapped_bytes},
      {"remote_read_bytes", s.remote_read_bytes},
      {"remote_write_bytes", s.remote_write_bytes},
      {"kernels", s.kernels},
      {"host_kernels", s.host_kernels},
      {"host_writeback_bytes", s.host_writeback_bytes},
      {"host_wait_ns", static_cast<uint64_t>(s.host_wait_ns)},
      {"copies", s.copies},
      {"dma_h2d_bytes", s.dma_h2d_bytes},
      {"dma_d2h_bytes", s.dma_d2h_bytes},
      {"hidden_copy_bytes", s.hidden_copy_bytes},
      {"copy_wait_ns", static_cast<uint64_t>(s.copy_wait_ns)},
      {"early_launches", s.early_launches},
      {"faulted_awaiting_copy_pages", s.faulted_awaiting_copy_pages},
      {"page_accesses", s.page_accesses},
      {"policy_table_bytes", run.policy_table_bytes},
      {"budget_overshoot_max_bytes", s.budget_overshoot_max_bytes},
      {"budget_overshoot_mean_bytes", s.budget_overshoot_mean_bytes},
      {"fault_records", s.fault_records},
      {"fault_events", s.fault_events},
      {"dropped_records", s.dropped_records},
      {"stale_eviction_records", s.stale_eviction_records},
      {"call_h2d_bytes", s.call_h2d_bytes},
      {"call_d2h_bytes", s.call_d2h_bytes},
      {"unrecorded_d2h_bytes", s.unrecorded_d2h_bytes},
      {"uvm_h2d_bytes", s.uvm_h2d_bytes},
      {"uvm_d2h_bytes", s.uvm_d2h_bytes},
      {"thrashing_detections", s.thrashing_detections},
      {"throttled_ns", static_cast<uint64_t>(s.throttled_ns)},
  };
}

double SteadyStateMean(const RunStats& stats, uint64_t IterationStats::*field) {
  return SteadyMean(stats, [field](const IterationStats& it) { return it.*field; });
}

double SteadyStateMeanTime(const RunStats& stats) {
  return SteadyMean(stats, [](const IterationStats& it) { return it.time_ns; });
}

}  // namespace umlab::cli
