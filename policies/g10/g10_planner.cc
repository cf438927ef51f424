#include "policies/g10/g10_planner.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "policies/g10/link_budget.h"

namespace umlab {
namespace {

// Movement times of one tensor, in microseconds (the artifact's safe times):
// a round trip must fit its inactive period with delta's margin.
struct RoundTrip {
  double out_us = 0;       // eviction: latency, fault handling, the bytes
  double in_us = 0;        // prefetch back
  double safe_us = 0;      // out + in + delta x the mean of the two
  double prefetch_us = 0;  // in + the same margin: how early a prefetch starts
};

RoundTrip Trip(double bytes, double out_latency_us, double in_latency_us, double out_rate,
               double in_rate, double delta) {
  RoundTrip trip;
  trip.out_us = out_latency_us + bytes / out_rate;
  trip.in_us = in_latency_us + bytes / in_rate;
  const double margin = delta * (trip.out_us + trip.in_us) / 2;
  trip.safe_us = trip.out_us + trip.in_us + margin;
  trip.prefetch_us = trip.in_us + margin;
  return trip;
}

class Planner {
 public:
  Planner(const IterationGraph& iteration, const DeviceConfig& device, uint64_t capacity_bytes,
          const G10Options& options)
      : vitality_(iteration),
        options_(options),
        kernels_(vitality_.kernels()),
        storage_(device.link.storage.present),
        rates_{device.link.h2d_bytes_per_second / 1e6, device.link.d2h_bytes_per_second / 1e6,
               storage_ ? device.link.storage.read_bytes_per_second / 1e6 : 0,
               storage_ ? device.link.storage.write_bytes_per_second / 1e6 : 0},
        budget_(vitality_, rates_),
        device_line_(static_cast<double>(capacity_bytes)),
        target_line_(static_cast<double>(capacity_bytes) * options.line),
        host_line_(storage_ ? static_cast<double>(device.host_memory_bytes)
                            : std::numeric_limits<double>::infinity()),
        fault_us_(static_cast<double>(device.fault_latency_ns) / 1000.0),
        storage_read_us_(static_cast<double>(device.link.storage.read_latency_ns) / 1000.0),
        storage_write_us_(static_cast<double>(device.link.storage.write_latency_ns) / 1000.0) {
    plan_.tensors = vitality_.tensors();
    plan_.at_kernel.resize(static_cast<size_t>(kernels_));
    plan_.periods = vitality_.periods().size();
    plan_.line_bytes = target_line_;
    device_memory_.assign(static_cast<size_t>(kernels_), 0.0);
    host_memory_.assign(static_cast<size_t>(kernels_), 0.0);
  }

  G10Plan Run() {
    if (kernels_ == 0) return plan_;
    double total = 0;
    for (const TensorLife& tensor : vitality_.tensors()) {
      if (tensor.used) total += static_cast<double>(tensor.bytes);
    }
    device_memory_.assign(static_cast<size_t>(kernels_), total);
    plan_.peak_estimate_bytes = total;
    AllocateAroundLives();
    EvictInactivePeriods();
    PrefetchEagerly();
    plan_.planned_peak_bytes = *std::max_element(device_memory_.begin(), device_memory_.end());
    return std::move(plan_);
  }

 private:
  // A pre-eviction whose prefetch the eager pass places.
  struct PlannedOffload {
    uint32_t tensor;
    double bytes;
    int prefetch_kernel;  // where the budget says the prefetch must start
    int evicted_kernel;   // where the eviction is done
  };

  void Add(int kernel, MovementKind kind, uint32_t tensor, MemoryTier tier = MemoryTier::kHost) {
    plan_.at_kernel[static_cast<size_t>(kernel % kernels_)].push_back(Movement{kind, tensor, tier});
    switch (kind) {
      case MovementKind::kDeallocate: ++plan_.deallocations; break;
      case MovementKind::kPreallocate: ++plan_.preallocations; break;
      case MovementKind::kPrefetch: ++plan_.prefetches; break;
      case MovementKind::kPreEvict:
        ++(tier == MemoryTier::kStorage ? plan_.evictions_to_storage : plan_.evictions_to_host);
        break;
    }
  }

  // Subtracts `bytes` from the estimate of kernels [from, to); indices past
  // the iteration's end wrap round.
  void Release(double bytes, int from, int to) {
    for (int k = from; k < to; ++k) device_memory_[static_cast<size_t>(k % kernels_)] -= bytes;
  }

  bool Fits(double line, int from, int to) const {
    for (int k = from; k < to; ++k) {
      if (device_memory_[static_cast<size_t>(k % kernels_)] > line) return false;
    }
    return true;
  }
  bool FitsEverywhere() const { return Fits(target_line_, 0, kernels_); }

  bool HostHasRoomFor(double bytes) const {
    for (double used : host_memory_) {
      if (used > host_line_ - bytes) return false;
    }
    return true;
  }
  void HoldOnHost(double bytes, const InactivePeriod& period) {
    const int end = period.looped ? period.end + kernels_ : period.end;
    for (int k = period.start; k < end; ++k) host_memory_[static_cast<size_t>(k % kernels_)] += bytes;
  }

  // Step 1: intermediates take memory only from just before their birth to
  // their death, tensor by tensor until the estimate fits.
  void AllocateAroundLives() {
    const std::vector<TensorLife>& tensors = vitality_.tensors();
    for (uint32_t t = 0; t < tensors.size(); ++t) {
      if (FitsEverywhere()) return;
      const TensorLife& tensor = tensors[t];
      if (tensor.global || !tensor.used) continue;
      const double bytes = static_cast<double>(tensor.bytes);
      const double start_us =
          vitality_.StartUs(tensor.birth) - bytes * options_.malloc_us_per_byte;
      int issue = 0;
      if (start_us < 0) {
        Release(bytes, 0, tensor.birth);
      } else {
        issue = vitality_.KernelAt(start_us, 0, tensor.birth);
        if (issue < 0) issue = tensor.birth;
        Release(bytes, 0, issue);
      }
      Add(issue, MovementKind::kPreallocate, t);

      const int death = tensor.death == -1 ? tensor.birth + 1 : tensor.death;
      Add(death, MovementKind::kDeallocate, t);
      if (death < kernels_) Release(bytes, death, kernels_);
    }
  }

  // What offloading `period` would take off the memory estimate where it is
  // over the device's size: bytes x time, between where half of the
  // eviction and half of the prefetch would be done.
  double PressureRelieved(const InactivePeriod& period) const {
    const double bytes = static_cast<double>(vitality_.tensors()[period.tensor].bytes);
    int from = period.start;
    int to = period.looped ? period.end + kernels_ : period.end;
    if (!period.looped) {
      const Lane out = storage_ ? Lane::kDeviceToStorage : Lane::kDeviceToHost;
      const Lane in = storage_ ? Lane::kStorageToDevice : Lane::kHostToDevice;
      from = budget_.FinishKernel(out, bytes / 2, period.start);
      to = budget_.StartKernel(in, bytes / 2, period.end);
    }
    double relieved = 0;
    for (int k = from; k < to; ++k) {
      if (device_memory_[static_cast<size_t>(k % kernels_)] > device_line_) {
        relieved += bytes * vitality_.DurationUs(k);
      }
    }
    return relieved;
  }

  // Step 2 (Algorithm 1). Relief only shrinks as the plan grows (the
  // estimate falls, the link fills), so a max-heap of stale values, rechecked
  // at the top, takes the period of greatest relief each round, as the
  // artifact's full re-sort does, in far less time.
  void EvictInactivePeriods() {
    const std::vector<InactivePeriod>& periods = vitality_.periods();
    struct Candidate {
      double relief;
      double weight;  // ties: the longer, larger period first
      uint32_t period;
      bool operator<(const Candidate& o) const {
        if (relief != o.relief) return relief < o.relief;
        if (weight != o.weight) return weight < o.weight;
        return period > o.period;
      }
    };
    std::priority_queue<Candidate> heap;
    for (uint32_t p = 0; p < periods.size(); ++p) {
      const double bytes = static_cast<double>(vitality_.tensors()[periods[p].tensor].bytes);
      heap.push(Candidate{PressureRelieved(periods[p]), periods[p].time_us * bytes, p});
    }
    while (!heap.empty() && !FitsEverywhere()) {
      Candidate top = heap.top();
      heap.pop();
      const double relief = PressureRelieved(periods[top.period]);
      if (relief < top.relief) {
        top.relief = relief;
        heap.push(top);
        continue;
      }
      if (relief <= 0) break;  // nothing left that relieves any kernel
      ConsiderOffloading(periods[top.period]);
    }
  }

  void ConsiderOffloading(const InactivePeriod& period) {
    const int end = period.looped ? period.end + kernels_ : period.end;
    if (Fits(target_line_, period.start, end)) return;
    if (end - period.start == 1) return;  // a single kernel hides nothing
    const TensorLife& tensor = vitality_.tensors()[period.tensor];
    const double bytes = static_cast<double>(tensor.bytes);
    const RoundTrip host = Trip(bytes, fault_us_, fault_us_, rates_.device_to_host,
                                rates_.host_to_device, options_.delta);
    if (storage_) {
      const RoundTrip drive =
          Trip(bytes, storage_write_us_ + fault_us_, storage_read_us_ + fault_us_,
               rates_.device_to_storage, rates_.storage_to_device, options_.delta);
      if (period.time_us > drive.safe_us) {
        if (period.looped) {
          OffloadAcrossIterations(period, drive, MemoryTier::kStorage);
          return;
        }
        const int ideal_done =
            vitality_.KernelAt(vitality_.StartUs(period.start) + drive.out_us, period.start, end);
        if (ideal_done < 0) return;
        const bool drive_crowded = !budget_.AnyRoom(Lane::kDeviceToStorage, period.start, ideal_done);
        if (drive_crowded && HostHasRoomFor(bytes)) {
          if (OffloadWithin(period, MemoryTier::kHost)) HoldOnHost(bytes, period);
        } else {
          OffloadWithin(period, MemoryTier::kStorage);
        }
        return;
      }
    }
    if (period.time_us > host.safe_us) {
      if (!HostHasRoomFor(bytes)) return;
      if (period.looped) {
        OffloadAcrossIterations(period, host, MemoryTier::kHost);
      } else {
        OffloadWithin(period, MemoryTier::kHost);
      }
      // The artifact books the host for the period whether or not it
      // offloaded: kept, so the host line binds as it does there.
      HoldOnHost(bytes, period);
    }
  }

  // A period inside the iteration: the budget places the eviction's end and
  // the prefetch's latest start; the eager pass places the prefetch.
  bool OffloadWithin(const InactivePeriod& period, MemoryTier tier) {
    const double bytes = static_cast<double>(vitality_.tensors()[period.tensor].bytes);
    const bool drive = tier == MemoryTier::kStorage;
    const Lane out = drive ? Lane::kDeviceToStorage : Lane::kDeviceToHost;
    const Lane in = drive ? Lane::kStorageToDevice : Lane::kHostToDevice;
    const int prefetch = budget_.StartKernel(in, bytes, period.end);
    const int evicted = budget_.FinishKernel(out, bytes, period.start);
    if (prefetch <= evicted) return false;
    Add(period.start, MovementKind::kPreEvict, period.tensor, tier);
    offloads_.push_back(PlannedOffload{period.tensor, bytes, prefetch, evicted});
    budget_.Book(in, bytes, prefetch);
    budget_.Book(out, bytes, period.start);
    Release(bytes, evicted + 1, prefetch);
    return true;
  }

  // A global's period across the iteration's end: timed by the ideal
  // schedule alone, and prefetched where the margin says (the artifact does
  // not book these on the link budget).
  void OffloadAcrossIterations(const InactivePeriod& period, const RoundTrip& trip,
                               MemoryTier tier) {
    const int end = period.end + kernels_;
    const int evicted =
        vitality_.KernelAt(vitality_.StartUs(period.start) + trip.out_us, period.start, end);
    const int prefetch =
        vitality_.KernelAt(vitality_.StartUs(end) - trip.prefetch_us, period.start, end);
    if (evicted < 0 || prefetch < 0) return;
    if (prefetch != period.start) {
      Add(period.start, MovementKind::kPreEvict, period.tensor, tier);
      Add(prefetch, MovementKind::kPrefetch, period.tensor);
    }
    Release(static_cast<double>(vitality_.tensors()[period.tensor].bytes), evicted + 1, prefetch);
  }

  // Step 3: each prefetch as early as the estimate allows after its
  // eviction is done, in the order the budget placed them.
  void PrefetchEagerly() {
    std::stable_sort(offloads_.begin(), offloads_.end(), [](const PlannedOffload& a, const PlannedOffload& b) {
      return a.prefetch_kernel < b.prefetch_kernel;
    });
    for (const PlannedOffload& offload : offloads_) {
      int k = offload.prefetch_kernel;
      while (k > offload.evicted_kernel + 1 &&
             target_line_ > device_memory_[static_cast<size_t>(k - 1)]) {
        --k;
      }
      Add(k, MovementKind::kPrefetch, offload.tensor);
      for (int j = k; j < offload.prefetch_kernel; ++j) {
        device_memory_[static_cast<size_t>(j)] += offload.bytes;
      }
    }
  }

  TensorVitality vitality_;
  G10Options options_;
  int kernels_;
  bool storage_;
  LaneRates rates_;
  LinkBudget budget_;
  double device_line_;  // the device's memory
  double target_line_;  // what the plan fills
  double host_line_;
  double fault_us_;
  double storage_read_us_;
  double storage_write_us_;
  std::vector<double> device_memory_;  // the estimate, per kernel
  std::vector<double> host_memory_;
  std::vector<PlannedOffload> offloads_;
  G10Plan plan_;
};

}  // namespace

G10Plan PlanIteration(const IterationGraph& iteration, const DeviceConfig& device,
                      uint64_t capacity_bytes, const G10Options& options) {
  return Planner(iteration, device, capacity_bytes, options).Run();
}

}  // namespace umlab
