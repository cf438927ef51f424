#include "core/run_series.h"

#include <algorithm>

namespace umlab {
namespace {

// The gauges and the sums, so that widening and extending treat each alike.
std::vector<std::vector<uint64_t>*> Gauges(RunSeries& s) {
  return {&s.resident_bytes, &s.in_flight_bytes, &s.prefetched_unused_bytes, &s.inactive_bytes};
}
std::vector<std::vector<uint64_t>*> Sums(RunSeries& s) {
  return {&s.fault_h2d_bytes, &s.prefetch_h2d_bytes, &s.eviction_d2h_bytes, &s.faults};
}

}  // namespace

RunSeriesRecorder::RunSeriesRecorder(Nanos expected_ns, size_t max_intervals)
    : max_intervals_(std::max<size_t>(2, max_intervals)) {
  series_.interval_ns =
      std::max<Nanos>(1, expected_ns / static_cast<Nanos>(max_intervals_));
}

size_t RunSeriesRecorder::IntervalOf(Nanos now) {
  now = std::max<Nanos>(0, now);
  while (static_cast<uint64_t>(now / series_.interval_ns) >= max_intervals_) Widen();
  return static_cast<size_t>(now / series_.interval_ns);
}

void RunSeriesRecorder::Widen() {
  // Pairs merge: a gauge keeps the earlier state, a sum adds.
  for (std::vector<uint64_t>* gauge : Gauges(series_)) {
    for (size_t i = 0; 2 * i < gauge->size(); ++i) (*gauge)[i] = (*gauge)[2 * i];
    gauge->resize((gauge->size() + 1) / 2);
  }
  for (std::vector<uint64_t>* sum : Sums(series_)) {
    for (size_t i = 0; 2 * i < sum->size(); ++i) {
      (*sum)[i] = (*sum)[2 * i] + (2 * i + 1 < sum->size() ? (*sum)[2 * i + 1] : 0);
    }
    sum->resize((sum->size() + 1) / 2);
  }
  if (sampled_ != SIZE_MAX) sampled_ /= 2;
  series_.interval_ns *= 2;
}

void RunSeriesRecorder::Extend(size_t size) {
  for (std::vector<uint64_t>* gauge : Gauges(series_)) {
    if (gauge->size() < size) gauge->resize(size, gauge->empty() ? 0 : gauge->back());
  }
  for (std::vector<uint64_t>* sum : Sums(series_)) {
    if (sum->size() < size) sum->resize(size, 0);
  }
}

void RunSeriesRecorder::Sample(const Engine& engine, size_t interval) {
  Extend(interval + 1);
  const ResidencyBreakdown now = engine.Residency();
  series_.resident_bytes[interval] = now.resident_bytes;
  series_.in_flight_bytes[interval] = now.in_flight_bytes;
  series_.prefetched_unused_bytes[interval] = now.prefetched_unused_bytes;
  series_.inactive_bytes[interval] = now.inactive_bytes;
  sampled_ = interval;
}

void RunSeriesRecorder::OnIterationBegin(uint64_t /*index*/, Nanos now) {
  if (!current_.empty()) series_.kernels = std::move(current_);
  current_.clear();
  iteration_start_ = now;
}

void RunSeriesRecorder::OnKernelDefined(uint32_t exec_id, const std::string& name) {
  names_[exec_id] = name;
}

void RunSeriesRecorder::OnKernelBegin(uint32_t exec_id, Nanos now) {
  KernelSample kernel;
  auto name = names_.find(exec_id);
  kernel.name = name != names_.end() ? name->second : "kernel " + std::to_string(exec_id);
  kernel.start_ns = now - iteration_start_;
  current_.push_back(std::move(kernel));
  kernel_running_ = true;
}

void RunSeriesRecorder::OnKernelEnd(uint32_t /*exec_id*/, Nanos now) {
  if (!current_.empty()) current_.back().time_ns = now - iteration_start_ - current_.back().start_ns;
  kernel_running_ = false;
}

void RunSeriesRecorder::OnFaultBatch(Nanos start, uint64_t faults, uint64_t faulted_pages) {
  const size_t interval = IntervalOf(start);
  Extend(interval + 1);
  series_.faults[interval] += faults;
  // A batch serviced between kernels (a real backend's late delivery)
  // belongs to the kernel that raised it: the last one.
  if (!current_.empty() && (kernel_running_ || current_.back().time_ns > 0)) {
    current_.back().faults += faults;
    current_.back().faulted_pages += faulted_pages;
  }
}

void RunSeriesRecorder::OnTransferCompleted(const Transfer& transfer, Nanos now) {
  const size_t interval = IntervalOf(now);
  Extend(interval + 1);
  switch (transfer.kind) {
    case TransferKind::kFaultMigration:
      series_.fault_h2d_bytes[interval] += transfer.copy_bytes();
      break;
    case TransferKind::kPrefetch:
      series_.prefetch_h2d_bytes[interval] += transfer.copy_bytes();
      break;
    case TransferKind::kEviction:
      series_.eviction_d2h_bytes[interval] += transfer.copy_bytes();
      break;
  }
}

void RunSeriesRecorder::OnDeviceEvicted(BlockNumber /*block*/, uint64_t bytes, Nanos now) {
  const size_t interval = IntervalOf(now);
  Extend(interval + 1);
  series_.eviction_d2h_bytes[interval] += bytes;
}

void RunSeriesRecorder::OnStep(const Engine& engine, Nanos now) {
  const size_t interval = IntervalOf(now);
  if (sampled_ == SIZE_MAX || interval > sampled_) Sample(engine, interval);
}

void RunSeriesRecorder::OnFinish(const Engine& engine, Nanos now) {
  const size_t last = IntervalOf(now);
  if (sampled_ == SIZE_MAX || last > sampled_) Sample(engine, last);
  Extend(last + 1);
  if (!current_.empty()) series_.kernels = std::move(current_);
  current_.clear();
}

}  // namespace umlab
