// G10's planner (MICRO '23, §4.3–4.4; the artifact's scheduling_prefetch in
// src/analysis.cc, as its `prefetch_lru` configuration runs it, which is
// what the paper calls G10) over one iteration:
//
//  1. Estimate the device memory each kernel needs with every used tensor
//     resident, then pre-allocate each intermediate just before its birth
//     (by G10's allocation cost) and pre-deallocate it at its death, tensor
//     by tensor until the estimate fits.
//  2. Smart eviction (Algorithm 1): while some kernel's estimate is over the
//     line, take the inactive period that would remove the most memory
//     pressure (bytes x time over the device's size, between where half
//     its eviction and half its prefetch would be done), and, if it is long
//     enough to hide the round trip with delta's margin ("safe time"),
//     pre-evict the tensor at its start: to storage, or to the host when the
//     drive's lane is crowded and the host has room below its line; to the
//     host when the period is only long enough for the host. The per-kernel
//     link budget (link_budget.h) says when each eviction is done and when
//     each prefetch has to start.
//  3. Eager prefetch: each prefetch moves as early as the memory estimate
//     allows, but not before its eviction is done.
//
// Where the artifact and the paper differ, this follows the artifact;
// docs/g10.md lists where umlab differs from the artifact and why.
#ifndef UMLAB_POLICIES_G10_G10_PLANNER_H_
#define UMLAB_POLICIES_G10_G10_PLANNER_H_

#include <cstdint>
#include <vector>

#include "core/device_config.h"
#include "core/memory_tier.h"
#include "core/program_graph.h"
#include "policies/g10/tensor_vitality.h"

namespace umlab {

struct G10Options {
  // The margin on each movement's estimated time (the artifact's
  // delta_parameter; its configs use 0.5).
  double delta = 0.5;
  // The fraction of device memory the plan fills (the artifact: 0.99).
  double line = 0.99;
  // Allocation cost per byte, in microseconds: how early pre-allocation
  // starts (the artifact's GPU_malloc_uspB).
  double malloc_us_per_byte = 0.000000814;
};

// What to do with a tensor when a kernel begins. The order is the order of
// application within a kernel: room is made before anything is brought.
enum class MovementKind : uint8_t { kDeallocate, kPreEvict, kPreallocate, kPrefetch };

struct Movement {
  MovementKind kind = MovementKind::kPrefetch;
  uint32_t tensor = 0;
  MemoryTier tier = MemoryTier::kHost;  // kPreEvict: where it goes
};

struct G10Plan {
  std::vector<TensorLife> tensors;
  std::vector<std::vector<Movement>> at_kernel;  // per kernel of the iteration
  // What the planner decided, for policy stats and tests.
  uint64_t periods = 0;              // inactive periods found
  uint64_t evictions_to_host = 0;    // pre-evictions planned
  uint64_t evictions_to_storage = 0;
  uint64_t prefetches = 0;
  uint64_t preallocations = 0;
  uint64_t deallocations = 0;
  double peak_estimate_bytes = 0;    // the memory estimate's peak, before step 2
  double planned_peak_bytes = 0;     // and after step 3
  double line_bytes = 0;

  size_t kernels() const { return at_kernel.size(); }
};

G10Plan PlanIteration(const IterationGraph& iteration, const DeviceConfig& device,
                      uint64_t capacity_bytes, const G10Options& options);

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_G10_PLANNER_H_
