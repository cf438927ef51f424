// `flashneuron`: FlashNeuron (Bae et al., FAST '21) as G10's artifact
// models it for its comparison (src/analysis.cc:
// scheduling_offload_flashneuron and FlashNeuron_simulator::run). FlashNeuron
// offloads activations to the SSD over GPUDirect Storage during the
// forward pass and brings them back for the backward pass:
//   - plan: the intermediates the forward pass uses that live past the
//     loss are offload candidates, in the order the forward pass meets
//     them; they are chosen one by one until the rest fit in what the
//     device has beside the weights and the largest kernel's working set.
//     Each leaves at the start of its last inactive period that begins in
//     the forward pass. When even all of them leave too little room, the
//     model does not train, as in the artifact;
//   - forward: chosen tensors are pre-evicted to storage when their kernel
//     starts;
//   - backward (from the first kernel whose name has "loss" in it; without
//     one, the kernel after which live intermediates peak): when a kernel
//     ends, the offloaded tensors of the kernels that follow are prefetched
//     in order while the free device memory, less the largest working set,
//     holds them; the rest come back on demand;
//   - intermediates are allocated just before the kernel that creates them
//     (populated, as FlashNeuron's own allocator does) and freed after their
//     last use (discarded).
// umlab runs it over unified memory, so two things differ from the
// artifact's GDS-only simulator (docs/g10.md): the backward pass does not
// wait for every offload to land (an eviction frees its frame when it is
// issued), and memory the plan did not foresee is evicted least recently
// migrated first rather than failing the run.
#ifndef UMLAB_POLICIES_G10_FLASHNEURON_H_
#define UMLAB_POLICIES_G10_FLASHNEURON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "core/policy.h"
#include "core/iteration_plans.h"
#include "policies/g10/tensor_vitality.h"

namespace umlab {

struct FlashNeuronPlan {
  std::vector<TensorLife> tensors;
  std::vector<std::vector<uint32_t>> uses;         // per kernel
  std::vector<std::vector<uint32_t>> offload_at;   // per kernel: tensors to offload
  std::vector<std::vector<uint32_t>> populate_at;  // per kernel: born in it or the next
  std::vector<std::vector<uint32_t>> discard_at;   // per kernel: dead since the one before
  std::vector<bool> offloaded;                     // per tensor
  int backward_from = 0;        // the first backward kernel
  uint64_t working_set_bytes = 0;  // the largest kernel's tensors
  uint64_t offloaded_bytes = 0;
  size_t kernels() const { return uses.size(); }
};

// Plans one iteration; fails when FlashNeuron cannot train the model in
// `capacity_bytes`. `names` are the program's kernel names.
absl::StatusOr<FlashNeuronPlan> PlanFlashNeuron(
    const IterationGraph& iteration, const absl::flat_hash_map<uint32_t, std::string>& names,
    uint64_t capacity_bytes);

class FlashNeuronPolicy final : public Policy {
 public:
  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnIterationBegin(uint64_t iteration) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnKernelEnd(uint32_t exec_id) override;
  void ReportStats(PolicyStats& out) const override;

 private:
  // Prefetches what the kernels after `kernel` need, while memory allows.
  void PrefetchAfter(const FlashNeuronPlan& plan, size_t kernel);

  IterationPlans<FlashNeuronPlan> plans_;
  const FlashNeuronPlan* running_ = nullptr;  // the plan of the kernel running now
  size_t running_kernel_ = 0;
  absl::flat_hash_set<uint32_t> fetched_;  // offloaded tensors brought back this iteration
  uint64_t offloads_ = 0;
  uint64_t prefetches_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_FLASHNEURON_H_
