// GO-MemFerry's gradient offload plan (Yao et al., §IV-D): which layers keep
// their gradients in device memory and which write them straight to host
// memory by DHA, so that the gradients kept take at most the user's share of
// all gradient bytes (the "reserve factor" S_req) and the backward is as fast
// as that allows.
//
// Every layer starts offloaded. Keeping layer i's gradient on the GPU costs
// its size S_i and gains T_GBP(i) - T_CBP(i) (its backward with the gradient
// written to the host, less its backward with the gradient in HBM). The
// kept set is a 0/1 knapsack, solved as the paper's dynamic program over
// layers and space:
//   D(i, j) = max(D(i-1, j), D(i-1, j - S_i) + T_GBP(i) - T_CBP(i)).
// The paper does not say in what unit j counts bytes. Here it is
// `size_unit_bytes`, widened when the table would have more than
// kMaxCapacityUnits columns; a layer's size is rounded up to whole units and
// the capacity down, so the plan never keeps more than the reserve allows.
// When all layers fit the reserve there is no choice to make and no
// program: every layer that gains is kept (rounding would otherwise make
// a reserve of 1 leave a layer out). Times are integer nanoseconds, so
// gains add exactly.
#ifndef UMLAB_POLICIES_MEMFERRY_GRADIENT_OFFLOAD_PLANNER_H_
#define UMLAB_POLICIES_MEMFERRY_GRADIENT_OFFLOAD_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/memory_units.h"

namespace umlab {

// One layer's backward under the two gradient placements (§IV-D's names).
struct GradientCosts {
  std::string name;
  uint64_t gradient_bytes = 0;        // S_i
  Nanos backward_in_device = 0;       // T_CBP(i): gradients written to HBM
  Nanos backward_to_host = 0;         // T_GBP(i): gradients written to host memory by DHA
};

struct GradientOffloadOptions {
  // S_req: the fraction of all gradient bytes that may stay on the GPU, in
  // [0, 1]. 0 offloads every gradient (the paper's default GO-MemFerry);
  // 1 leaves the plan free to keep them all.
  double reserve_factor = 0;
  // The dynamic program's column width, at least 1 byte. Page-sized by
  // default: gradients are placed page by page.
  uint64_t size_unit_bytes = kPageSize;
};

// The columns the dynamic program may have: 2^16 of them, over a few hundred
// layers, is a table of a few megabytes of choices and well under a second.
inline constexpr uint64_t kMaxCapacityUnits = 1ull << 16;

struct GradientOffloadPlan {
  std::vector<bool> keep_in_device;  // per layer: true = gradient in HBM
  uint64_t reserve_bytes = 0;        // S_req times all gradient bytes, rounded down
  uint64_t kept_bytes = 0;           // the kept layers' gradient bytes
  uint64_t size_unit_bytes = 0;      // the unit the program counted in
  Nanos gain = 0;                    // the sum of T_GBP - T_CBP over the kept layers
  // The layers' backward time under the plan: every T_GBP, less the gain.
  Nanos backward_time = 0;
};

// InvalidArgument for a reserve factor outside [0, 1], a zero unit or a
// negative time.
absl::StatusOr<GradientOffloadPlan> PlanGradientOffload(const std::vector<GradientCosts>& layers,
                                                        const GradientOffloadOptions& options);

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_GRADIENT_OFFLOAD_PLANNER_H_
