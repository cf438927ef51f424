// `memferry`: MemFerry's execution scheduler (Yao et al., "MemFerry: A Fast
// and Memory Efficient Offload Training Framework with Hybrid GPU
// Computation", §IV-B) as a umlab policy. Before the run it reads the
// program (the last iteration's graph, the steady one) as per-layer times
// from umlab's own cost model (layer_table_builder.h), gives each layer of
// parameters a mode with the paper's planner (memferry_planner.h), and then
// carries the modes out:
//  - GFGB: the layer's parameter pages are prefetched at each iteration's
//    start, in forward order (the engine's prefetch queue is first come,
//    first served, so the loads stream back to back as the model's do), and
//    stay on the device.
//  - DHA: its pages are mapped remotely (PolicyContext::MapRemote) when the
//    program activates them and for the whole run: every access crosses the
//    link, and they never take a frame.
//  - DFGB: mapped remotely like DHA for the forward. At the end of the
//    layer's forward (the kernel where the model starts its copy) they are
//    prefetched, which takes the mapping down, and queued behind any GFGB
//    load still going: the copy runs in the link's idle window and lands
//    before the layer's backward. At the end of the layer's last backward
//    kernel they are pre-evicted to the host: nothing has written them since
//    they came (the backward writes gradients), so the host's copy is still
//    good and the engine writes nothing back (Engine::EvictPages copies only
//    dirty pages when there is no storage tier). At the next kernel they are
//    mapped remotely again. A copy still queued at the release (the backward
//    read the pages through the mapping, which stays until the copy is
//    issued) is taken out of the queue; one still on its way goes back as it
//    lands.
// A fault on a DHA page, or on a DFGB page outside its time on the device,
// is answered with a remote mapping (MapRemotelyOnFault), so whatever the
// plan did not foresee (a first iteration shaped otherwise, a release the
// engine skipped) still leaves the parameters in host memory. Everything
// else (activations, gradients, optimizer state, and parameters no forward
// kernel reads) is paged on demand, evicted least recently migrated first.
//
// Pages are shared where the allocator packs small tensors together. A page
// holding any GFGB parameter is GFGB; a page shared by DFGB layers moves
// with the first of them in forward order (its copy is the earliest, its
// backward the last); a DHA page shared with a DFGB layer moves with it.
//
// The optimizer. MemFerry trains as ZeRO-Offload does, with the update on
// the CPU: the plan's times cover the forward and the backward only. umlab's
// zoo workloads run the optimizer on the GPU (optimizer-state tensors read
// by GPU kernels). The policy runs them as they are and says so
// (`optimizer_on_device`): the step's kernels read and write GFGB parameters
// in device memory and DHA and DFGB ones through their mappings (each such
// parameter crosses the link twice, a cost no plan counts), and the
// optimizer state is paged on demand. Since nothing on the host updates the
// parameters, GFGB pages are still on the device at the next iteration
// (unless evicted), so their copy is paid once, not per iteration as the
// plan assumes; refusing such workloads would leave the policy nothing to
// run on until the zoo has the ZeRO-Offload variant the paper compares with.
//
// The plan's kernel positions (DFGB copies and releases) apply to the
// iterations shaped like the planned one (ProgramGraph: same kernels, same
// tensors); in any other iteration DFGB layers stay remote, as DHA ones.
//
// `go-memferry` (GO-MemFerry, §IV-D) is this policy with a gradient reserve
// factor: the modes and the parameter gradients' placement are planned
// together (go_memferry_planner.h), and the gradients the plan sends to
// host memory are written there by the backward through remote mappings
// (gradient_placement.h). Without a reserve (memferry) gradients are paged
// on demand.
#ifndef UMLAB_POLICIES_MEMFERRY_MEMFERRY_H_
#define UMLAB_POLICIES_MEMFERRY_MEMFERRY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/freed_tensor_pages.h"
#include "core/host_step_schedule.h"
#include "core/param_map.h"
#include "core/policy.h"
#include "policies/memferry/go_memferry_planner.h"
#include "policies/memferry/gradient_placement.h"
#include "policies/memferry/layer_table_builder.h"
#include "policies/memferry/memferry_planner.h"
#include "policies/memferry/page_set.h"

namespace umlab {

// Where the modes come from: the planner, or one mode for every layer (the
// baselines the plan is measured against).
enum class ModeSource : uint8_t { kPlan, kAllGfgb, kAllDha };

struct MemferryPolicyOptions {
  DhaCriterion dha_criterion = DhaCriterion::kWholeLoad;
  // The share of the device memory the GFGB and DFGB parameters may take
  // (the planner's parameter budget); with a gradient reserve, the
  // parameters and the gradients kept on the device together.
  double parameter_share = 1.0;
  ModeSource modes = ModeSource::kPlan;
  // GO-MemFerry's S_req: the share of the parameter gradients' bytes that
  // may stay on the device, the rest written to host memory. None: plain
  // MemFerry, gradients paged on demand.
  std::optional<double> gradient_reserve;
  // Freed tensors' pages dropped and new ones populated, as on the device
  // memory MemFerry trains on (core/freed_tensor_pages.h).
  bool recycle_freed_pages = false;
};

// The parameters memferry and go-memferry share, and the options they say.
std::vector<ParamInfo> MemferryParams();
MemferryPolicyOptions MemferryOptionsFrom(const ParamMap& params);

class MemferryPolicy final : public Policy {
 public:
  explicit MemferryPolicy(const MemferryPolicyOptions& options) : options_(options) {}

  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  bool MapsRemotely() const override { return true; }

  void OnIterationBegin(uint64_t iteration) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnKernelEnd(uint32_t exec_id) override;
  void OnMigrated(BlockNumber block, const PageMask& pages, TransferKind kind) override;
  void OnAllocatorEvent(const Event& event) override;
  PageMask MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) override;
  void ReportStats(PolicyStats& out) const override;

  // What Plan() decided, for tests and reports.
  const ProgramLayers& layers() const { return layers_; }
  const MemferryPlan& plan() const { return plan_; }
  // With a gradient reserve: the gradient plan carried out (per layer,
  // whether its gradients stay on the device), and the run's counts.
  const GoMemferryPlan& gradient_plan() const { return gradient_plan_; }
  const GradientPlacement& gradient_placement() const { return gradient_placement_; }

 private:
  absl::StatusOr<MemferryPlan> ChooseModes(const LayerTable& table, uint64_t parameter_budget_bytes,
                                           bool gradients_share_link) const;
  void ReportGradientStats(PolicyStats& out) const;
  // Which pages each layer moves and which are remote, and the kernels at
  // whose end DFGB copies start and releases happen.
  void PlacePages(const IterationGraph& planned);
  void MarkPlannedIterations(const ProgramGraph& program, const IterationGraph& planned);
  // Maps the remote pages not on the device now; those on it are sent back
  // first and mapped at the next kernel boundary.
  void MapRemotePages();
  // Pre-evicts those of `pages` on the device to the host and has them
  // mapped at the next boundary; those on their way go when they land.
  // Returns the pages that were on the device or on their way.
  PageMask SendBack(BlockNumber block, const PageMask& pages);
  void MapPendingPages();
  // Queues the layer's copy, for its first forward kernel (GFGB) or its
  // first backward kernel (DFGB).
  void QueueCopy(size_t layer);
  // Every page the layer moves is resident or on its way.
  bool OnDevice(size_t layer) const;
  // A DFGB layer's backward is over: its pages go back to the host.
  void Release(size_t layer);

  MemferryPolicyOptions options_;
  bool planned_ = false;
  ProgramLayers layers_;
  MemferryPlan plan_;
  GoMemferryPlan gradient_plan_;
  GradientPlacement gradient_placement_;
  // With the step on the CPU (offload=true), the gradients it reads go to
  // the host as the backward finishes each, as in ZeRO-Offload, which
  // MemFerry builds on (§II-B: "During the BP process, the gradients will
  // be asynchronously transmitted to CPU").
  HostStepSchedule host_step_;
  uint64_t gradients_written_back_ = 0;
  FreedTensorPages freed_pages_;
  std::vector<uint32_t> planned_exec_ids_;  // the planned iteration's kernels

  // Per layer (parallel to layers_.layers): the pages it moves. Empty for a
  // DHA layer; a page belongs to one layer at most.
  std::vector<PageSet> moved_pages_;
  PageSet remote_pages_;     // DHA and DFGB pages: mapped outside a DFGB window
  PageSet device_window_;    // DFGB pages between their copy and their release
  PageSet pending_remap_;    // released, to be mapped at the next boundary
  PageSet send_back_on_arrival_;  // released while their copy was on its way
  std::vector<size_t> copies_open_;  // DFGB layers copied and not yet released
  // Kernel index -> the DFGB layers whose copy starts, or that are released,
  // at its end.
  absl::flat_hash_map<size_t, std::vector<size_t>> copy_after_;
  absl::flat_hash_map<size_t, std::vector<size_t>> release_after_;
  // Kernel index -> the DFGB layers whose backward it begins.
  absl::flat_hash_map<size_t, std::vector<size_t>> backward_starts_;

  // The iteration under way.
  absl::flat_hash_map<uint64_t, bool> planned_marker_;  // marker -> shaped like the plan
  bool acting_ = false;
  size_t next_kernel_ = 0;
  Nanos iteration_start_ = 0;
  Nanos forward_end_ = -1;
  Nanos backward_end_ = -1;

  // Measured, in the last iteration the plan acted on.
  Nanos measured_forward_ = 0;
  Nanos measured_backward_ = 0;
  Nanos measured_step_ = 0;
  uint64_t planned_iterations_run_ = 0;
  // DFGB layers whose pages were not all on the device when their first
  // backward kernel began, and those pages' bytes, over the run.
  uint64_t late_copies_ = 0;
  uint64_t late_copy_bytes_ = 0;
  uint64_t kernels_off_plan_ = 0;
  // Remote pages found on the device, or arriving, at an iteration's start.
  uint64_t pages_left_resident_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_MEMFERRY_MEMFERRY_H_
