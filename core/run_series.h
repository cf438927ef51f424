// A run's statistics over time, at a bounded resolution: what the HTML
// report draws (docs/report.md) and the JSON contract's optional `series`
// object carries (docs/json-contract.md).
//
// Time is cut into equal intervals from 0. The recorder starts with an
// interval chosen from a hint (the program's pure compute time over the
// number of intervals wanted) and, whenever the run outlasts
// `max_intervals` of them, doubles the interval and merges neighbours, so
// however long the run, it keeps at most `max_intervals` values per series
// and the JSON stays small.
#ifndef UMLAB_CORE_RUN_SERIES_H_
#define UMLAB_CORE_RUN_SERIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/engine.h"
#include "core/engine_observer.h"
#include "core/memory_units.h"

namespace umlab {

// One kernel of the last iteration.
struct KernelSample {
  std::string name;           // from the program's kernel definitions
  Nanos start_ns = 0;         // from the iteration's start
  Nanos time_ns = 0;          // begin to end, stalls included
  uint64_t faults = 0;        // raw entries of the batches serviced while it ran
  uint64_t faulted_pages = 0; // distinct pages of those batches
};

struct RunSeries {
  Nanos interval_ns = 0;
  // Gauges: the state after the first engine step in each interval (the
  // previous interval's state where no step happened), in bytes.
  std::vector<uint64_t> resident_bytes;
  std::vector<uint64_t> in_flight_bytes;
  std::vector<uint64_t> prefetched_unused_bytes;
  std::vector<uint64_t> inactive_bytes;
  // Sums: bytes that finished crossing the link in each interval. Fault
  // migrations and prefetches host to device; write-backs device to host
  // (the device's own evictions counted when the engine hears of them).
  std::vector<uint64_t> fault_h2d_bytes;
  std::vector<uint64_t> prefetch_h2d_bytes;
  std::vector<uint64_t> eviction_d2h_bytes;
  // Raw fault entries per interval, by when their batch began service.
  std::vector<uint64_t> faults;
  // The kernels of the last iteration (of the whole run if it has no
  // iteration markers), in order.
  std::vector<KernelSample> kernels;
};

class RunSeriesRecorder final : public EngineObserver {
 public:
  // `expected_ns`: about how long the run takes (a lower bound will do);
  // the first interval is expected_ns / max_intervals, at least 1 ns.
  RunSeriesRecorder(Nanos expected_ns, size_t max_intervals);

  // The series so far, trimmed to the end of the run.
  const RunSeries& series() const { return series_; }

  void OnIterationBegin(uint64_t index, Nanos now) override;
  void OnKernelDefined(uint32_t exec_id, const std::string& name) override;
  void OnKernelBegin(uint32_t exec_id, Nanos now) override;
  void OnKernelEnd(uint32_t exec_id, Nanos now) override;
  void OnFaultBatch(Nanos start, uint64_t faults, uint64_t faulted_pages) override;
  void OnTransferCompleted(const Transfer& transfer, Nanos now) override;
  void OnDeviceEvicted(BlockNumber block, uint64_t bytes, Nanos now) override;
  void OnStep(const Engine& engine, Nanos now) override;
  void OnFinish(const Engine& engine, Nanos now) override;

 private:
  // The interval `now` falls in, after widening the intervals until it fits.
  size_t IntervalOf(Nanos now);
  void Widen();
  // Makes every series `size` long; gauges carry their last value forward.
  void Extend(size_t size);
  void Sample(const Engine& engine, size_t interval);

  size_t max_intervals_;
  RunSeries series_;
  // The interval the gauges were last sampled in (SIZE_MAX: never).
  size_t sampled_ = SIZE_MAX;
  absl::flat_hash_map<uint32_t, std::string> names_;
  std::vector<KernelSample> current_;  // the iteration running
  Nanos iteration_start_ = 0;
  bool kernel_running_ = false;
};

}  // namespace umlab

#endif  // UMLAB_CORE_RUN_SERIES_H_
