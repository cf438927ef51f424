// `light-params-remote`: the smallest policy that mixes migration and
// remote mapping (docs/policies.md, "Mixing migration and remote mapping"),
// on MemFerry's observation: a parameter that kernels read in one pass (a
// layer norm's scale and shift, a bias, an embedding table whose rows are
// gathered) costs about as much read from host memory as copied in, and on
// the device it takes frames that activations then lose; a GEMM's weight,
// read once per tile of its input's rows, does not (docs/devices.md,
// "Remote access"). So:
//   - by plan: at each iteration's start, the pages of every parameter no
//     kernel rereads are mapped remotely (MapRemote): they take no frame;
//   - per eviction: a page of such a parameter that was on the device when
//     the iteration began is mapped as soon as it is evicted (OnEvicted),
//     so it does not fault back in (on cuda, whose driver serves faults
//     before the engine hears of them, the only way it leaves for good);
//   - per fault: one that faults anyway is answered with a mapping rather
//     than a copy (MapRemotelyOnFault);
//   - everything else migrates on demand, evicting the least recently
//     migrated block, as `demand` does.
// A parameter is a tensor the program activates with the parameter role
// (core/tensor_role.h); a program without roles has none, and the policy
// then runs as `demand`.
#ifndef UMLAB_POLICIES_LIGHT_PARAMS_REMOTE_LIGHT_PARAMS_REMOTE_H_
#define UMLAB_POLICIES_LIGHT_PARAMS_REMOTE_LIGHT_PARAMS_REMOTE_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "core/iteration_plans.h"
#include "core/policy.h"

namespace umlab {

class LightParamsRemotePolicy final : public Policy {
 public:
  bool PlansAhead() const override { return true; }
  bool MapsRemotely() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnIterationBegin(uint64_t iteration) override;
  void OnEvicted(BlockNumber block, const PageMask& pages) override;
  PageMask MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) override;
  void ReportStats(PolicyStats& out) const override;

 private:
  // One iteration's light parameters' pages.
  struct LightPages {
    absl::flat_hash_map<BlockNumber, PageMask> pages;
    uint64_t light_bytes = 0;
    uint64_t reread_bytes = 0;
    size_t kernel_count = 0;
    size_t kernels() const { return kernel_count; }
  };
  // Of `block`, the running iteration's light pages.
  PageMask LightPagesOf(BlockNumber block) const;

  IterationPlans<LightPages> plans_;
  bool marked_ = false;  // an iteration marker has come: initialisation is over
  uint64_t fault_mappings_ = 0;
  uint64_t eviction_mappings_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_LIGHT_PARAMS_REMOTE_LIGHT_PARAMS_REMOTE_H_
