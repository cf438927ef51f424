// `light-params-remote`: the smallest policy that mixes migration and
// remote mapping (docs/policies.md, "Mixing migration and remote mapping"),
// on MemFerry's observation: a parameter that kernels read in one pass (a
// layer norm's scale and shift, a bias, an embedding table whose rows are
// gathered) costs about as much read from host memory as copied in, and on
// the device it takes frames that activations then lose; a GEMM's weight,
// read once per tile of its input's rows, does not (docs/devices.md,
// "Remote access"). So:
//   - by plan: at each iteration's start, the pages of every parameter that
//     no kernel rereads are mapped remotely (MapRemote); they never take a
//     frame;
//   - per eviction: a page of such a parameter that was on the device when
//     the iteration began is mapped as soon as it is evicted (OnEvicted),
//     so it does not fault back in; on the cuda backend, whose driver
//     serves faults before the engine hears of them, that is the only way
//     such a page leaves the device for good;
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
  using Pages = absl::flat_hash_map<BlockNumber, PageMask>;
  // Per iteration marker (IterationGraph::index): the light parameters'
  // pages. Kernels before the first marker (initialisation) go unplanned.
  absl::flat_hash_map<uint64_t, Pages> plans_;
  uint64_t last_index_ = 0;
  const Pages* current_ = nullptr;
  uint64_t light_bytes_ = 0;  // in the last iteration planned
  uint64_t heavy_bytes_ = 0;
  uint64_t fault_mappings_ = 0;
  uint64_t eviction_mappings_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_LIGHT_PARAMS_REMOTE_LIGHT_PARAMS_REMOTE_H_
