// `g10-deepum`: DeepUM as G10's artifact models it for its comparison (the
// "DeepUM+" baseline of the G10 paper; src/analysis.cc scheduling_prefetch
// and the DEEPUM eviction in src/simulationComponents.cc, with its configs'
// prefetch_degree 8). It stands for DeepUM's correlation tables with an
// oracle over the known kernel order:
//   - when kernel k starts, every tensor kernel k + 8 uses is prefetched
//     (pages without data are populated);
//   - a prefetch that needs a frame evicts the least recently migrated
//     block holding no tensor of the running window, kernels k .. k + 7
//     (none left: the prefetch waits); a fault evicts least recently
//     migrated, as the driver does;
//   - a victim's pages the allocator holds free (dead tensors) are dropped,
//     not written back; the rest go to the host until its line, then to
//     storage, as every eviction does.
// umlab's own `deepum` learns the kernel order from faults instead
// (policies/deepum).
#ifndef UMLAB_POLICIES_G10_G10_DEEPUM_H_
#define UMLAB_POLICIES_G10_G10_DEEPUM_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/policy.h"
#include "core/iteration_plans.h"

namespace umlab {

// The tensors each kernel of one iteration uses.
struct KernelLookahead {
  std::vector<GraphTensor> tensors;
  std::vector<std::vector<uint32_t>> uses;  // per kernel: reads and writes
  size_t kernels() const { return uses.size(); }
};

class G10DeepUmPolicy final : public Policy {
 public:
  explicit G10DeepUmPolicy(int degree) : degree_(degree) {}

  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnIterationBegin(uint64_t iteration) override { plans_.BeginIteration(iteration); }
  void OnKernelBegin(uint32_t exec_id) override;
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& query) override;
  PageMask PagesToDrop(const BlockState& victim) override { return victim.inactive; }
  void ReportStats(PolicyStats& out) const override;

 private:
  int degree_;
  IterationPlans<KernelLookahead> plans_;
  absl::flat_hash_set<BlockNumber> window_;  // blocks of the running window's tensors
  uint64_t tensors_prefetched_ = 0;
  uint64_t window_refusals_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_G10_DEEPUM_H_
