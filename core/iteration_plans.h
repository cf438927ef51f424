// Plans made per iteration of the program (core/program_graph.h), and the
// one the run is in now: what a policy that plans ahead (g10 and G10's
// baselines, lms, light-params-remote) carries out kernel by kernel. An iteration
// shaped like the one before it (same kernels, same tensors) shares its
// plan. A Plan says how many kernels it covers: size_t kernels() const.
#ifndef UMLAB_CORE_ITERATION_PLANS_H_
#define UMLAB_CORE_ITERATION_PLANS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/program_graph.h"

namespace umlab {

template <typename Plan>
class IterationPlans {
 public:
  // Plans each iteration with make(const IterationGraph&) -> Plan.
  template <typename Make>
  void Build(const ProgramGraph& program, Make make) {
    absl::Status built = TryBuild(program, [&](const IterationGraph& iteration) {
      return absl::StatusOr<Plan>(make(iteration));
    });
    (void)built;  // make cannot fail
  }

  // The same with make(const IterationGraph&) -> absl::StatusOr<Plan>: the
  // first iteration it refuses fails the whole.
  template <typename Make>
  absl::Status TryBuild(const ProgramGraph& program, Make make) {
    const std::vector<IterationGraph>& iterations = program.iterations;
    for (size_t i = 0; i < iterations.size(); ++i) {
      if (i > 0 && iterations[i].SameShape(iterations[i - 1])) {
        plans_.push_back(plans_.back());
      } else {
        absl::StatusOr<Plan> plan = make(iterations[i]);
        if (!plan.ok()) return plan.status();
        plans_.push_back(std::make_shared<const Plan>(*std::move(plan)));
        ++distinct_;
      }
      by_marker_[iterations[i].index] = i;
    }
    // A program without iteration markers runs its one plan from the start.
    current_ = plans_.empty() ? nullptr : plans_.front().get();
    next_kernel_ = 0;
    return absl::OkStatus();
  }

  // The program's iteration marker `index`: its plan from here on.
  void BeginIteration(uint64_t index) {
    auto it = by_marker_.find(index);
    current_ = it == by_marker_.end() ? nullptr : plans_[it->second].get();
    next_kernel_ = 0;
  }

  // A kernel begins: the plan it runs under and its index in the iteration,
  // or nullptr for a kernel no plan covers (the plan has fewer kernels, or
  // the policy was never given the program).
  std::pair<const Plan*, size_t> NextKernel() {
    const size_t kernel = next_kernel_++;
    if (current_ == nullptr || kernel >= current_->kernels()) {
      ++unplanned_kernels_;
      return {nullptr, kernel};
    }
    return {current_, kernel};
  }

  const Plan* current() const { return current_; }
  // The last iteration's plan: the steady one, for reports.
  const Plan* last() const { return plans_.empty() ? nullptr : plans_.back().get(); }
  uint64_t distinct() const { return distinct_; }
  uint64_t unplanned_kernels() const { return unplanned_kernels_; }

 private:
  std::vector<std::shared_ptr<const Plan>> plans_;  // one per graph iteration
  absl::flat_hash_map<uint64_t, size_t> by_marker_;  // marker index -> plans_
  const Plan* current_ = nullptr;
  size_t next_kernel_ = 0;
  uint64_t distinct_ = 0;
  uint64_t unplanned_kernels_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_CORE_ITERATION_PLANS_H_
