// `g10`: G10's planner (Zhang et al., MICRO '23) as a umlab policy. It plans
// once, before the run, over each iteration of the program (the program
// graph, core/program_graph.h): tensor vitality analysis
// (tensor_vitality.h), smart eviction and eager prefetch (g10_planner.h).
// Then, at each kernel's start, it carries out what the plan says for that
// kernel through the Policy interface like any other policy: it discards
// dead intermediates (pre-deallocation), pre-evicts tensors to the host or
// to storage, pre-allocates intermediates just before their birth, and
// prefetches tensors back. Whatever the plan did not foresee faults in and
// is evicted least recently migrated first, as in the artifact's UVM runs.
//
// Iterations with the same kernels and tensors share one plan; an iteration
// that differs (a first one that allocates lazily) gets its own.
#ifndef UMLAB_POLICIES_G10_G10_H_
#define UMLAB_POLICIES_G10_G10_H_

#include <cstdint>

#include "core/policy.h"
#include "policies/g10/g10_planner.h"
#include "core/iteration_plans.h"

namespace umlab {

class G10Policy final : public Policy {
 public:
  explicit G10Policy(const G10Options& options) : options_(options) {}

  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;

  void OnIterationBegin(uint64_t iteration) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void ReportStats(PolicyStats& out) const override;

 private:
  void Carry(const G10Plan& plan, const Movement& movement);

  G10Options options_;
  IterationPlans<G10Plan> plans_;
  uint64_t movements_carried_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_G10_H_
