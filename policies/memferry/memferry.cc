#include "policies/memferry/memferry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/tensor_role.h"

namespace umlab {

absl::StatusOr<MemferryPlan> MemferryPolicy::ChooseModes(const LayerTable& table,
                                                         uint64_t parameter_budget_bytes,
                                                         bool gradients_share_link) const {
  if (options_.modes == ModeSource::kPlan) {
    MemferryOptions planner;
    planner.dha_criterion = options_.dha_criterion;
    planner.parameter_budget_bytes = parameter_budget_bytes;
    planner.gradients_share_link = gradients_share_link;
    return PlanMemferry(table, planner);
  }
  MemferryPlan plan;
  plan.modes.assign(table.layers.size(), options_.modes == ModeSource::kAllGfgb
                                             ? ExecutionMode::kGfgb
                                             : ExecutionMode::kDha);
  plan.times = EvaluateSchedule(table, plan.modes, gradients_share_link);
  return plan;
}

absl::Status MemferryPolicy::Plan(const PlanInput& input) {
  if (input.program.iterations.empty()) return absl::OkStatus();
  const IterationGraph& planned = input.program.iterations.back();
  absl::StatusOr<ProgramLayers> layers =
      BuildLayerTable(planned, input.program.kernel_names, input.device);
  if (!layers.ok()) return PolicyRefusal(layers.status().message());
  layers_ = *std::move(layers);
  const bool gradients_share_link = !input.device.link.full_duplex;
  const uint64_t budget = static_cast<uint64_t>(
      std::floor(options_.parameter_share * static_cast<double>(input.capacity_bytes)));
  if (options_.gradient_reserve.has_value()) {
    absl::StatusOr<GoMemferryPlan> plan = PlanGoMemferry(
        layers_, *options_.gradient_reserve, budget, gradients_share_link,
        [&](const LayerTable& table, uint64_t parameter_budget_bytes) {
          return ChooseModes(table, parameter_budget_bytes, gradients_share_link);
        });
    if (!plan.ok()) return plan.status();
    gradient_plan_ = *std::move(plan);
    plan_ = gradient_plan_.modes;
  } else {
    absl::StatusOr<MemferryPlan> plan = ChooseModes(layers_.table, budget, gradients_share_link);
    if (!plan.ok()) return plan.status();
    plan_ = *std::move(plan);
  }

  planned_exec_ids_.clear();
  for (const GraphKernel& kernel : planned.kernels) planned_exec_ids_.push_back(kernel.exec_id);
  host_step_ = ScheduleHostStep(planned);
  PlacePages(planned);
  if (options_.gradient_reserve.has_value()) {
    gradient_placement_.Place(planned, layers_.gradients,
                              GradientsOnHost(gradient_plan_.gradients));
  }
  MarkPlannedIterations(input.program, planned);
  planned_ = true;
  return absl::OkStatus();
}

void MemferryPolicy::PlacePages(const IterationGraph& planned) {
  std::vector<PageSet> pages(layers_.layers.size());
  for (size_t l = 0; l < layers_.layers.size(); ++l) {
    for (uint32_t t : layers_.layers[l].parameters) {
      pages[l].AddRange(planned.tensors[t].address, planned.tensors[t].size);
    }
  }
  PageSet gfgb;
  for (size_t l = 0; l < pages.size(); ++l) {
    if (plan_.modes[l] == ExecutionMode::kGfgb) gfgb.Add(pages[l]);
  }
  moved_pages_.assign(pages.size(), PageSet());
  PageSet claimed = gfgb;
  for (size_t l = 0; l < pages.size(); ++l) {
    const LayerKernels& at = layers_.layers[l];
    switch (plan_.modes[l]) {
      case ExecutionMode::kGfgb:
        moved_pages_[l] = pages[l];
        break;
      case ExecutionMode::kDfgb:
        // In forward order, so a page shared by DFGB layers goes with the
        // first: its copy starts first and its backward ends last.
        moved_pages_[l] = pages[l];
        moved_pages_[l].Remove(claimed);
        claimed.Add(moved_pages_[l]);
        remote_pages_.Add(moved_pages_[l]);
        copy_after_[at.forward_end].push_back(l);
        release_after_[at.last_backward].push_back(l);
        backward_starts_[at.first_backward].push_back(l);
        break;
      case ExecutionMode::kDha:
        remote_pages_.Add(pages[l]);
        break;
    }
  }
  remote_pages_.Remove(gfgb);
}

void MemferryPolicy::MarkPlannedIterations(const ProgramGraph& program,
                                           const IterationGraph& planned) {
  // The kernels before the first marker are graph iteration 0; a marker
  // repeating its index (0) means the later iteration.
  for (const IterationGraph& iteration : program.iterations) {
    planned_marker_[iteration.index] = iteration.SameShape(planned);
  }
  acting_ = program.iterations.front().SameShape(planned);
}

void MemferryPolicy::OnIterationBegin(uint64_t iteration) {
  if (!planned_) return;
  auto it = planned_marker_.find(iteration);
  acting_ = it != planned_marker_.end() && it->second;
  next_kernel_ = 0;
  iteration_start_ = context().now();
  forward_end_ = backward_end_ = -1;
  // A DFGB layer the last iteration left on the device goes back.
  device_window_ = PageSet();
  send_back_on_arrival_ = PageSet();
  copies_open_.clear();
  MapPendingPages();
  MapRemotePages();
  gradient_placement_.OnIterationBegin(context(), acting_);
  // GFGB loads, back to back in forward order.
  for (size_t l = 0; l < moved_pages_.size(); ++l) {
    if (plan_.modes[l] == ExecutionMode::kGfgb) QueueCopy(l);
  }
}

void MemferryPolicy::MapRemotePages() {
  for (const auto& [block, mask] : remote_pages_.blocks()) {
    const PageMask wanted = mask & ~device_window_.In(block);
    const PageMask on_device = SendBack(block, wanted);
    pages_left_resident_ += on_device.count();
    if ((wanted & ~on_device).any()) context().MapRemote(block, wanted & ~on_device);
  }
}

PageMask MemferryPolicy::SendBack(BlockNumber block, const PageMask& pages) {
  const BlockState* state = context().memory().Find(block);
  if (state == nullptr) return PageMask();
  const PageMask resident = pages & state->resident;
  const PageMask arriving = pages & state->in_flight;
  if (resident.any()) {
    context().PreEvictPages(block, resident, MemoryTier::kHost);
    pending_remap_.AddPages(block, resident);
  }
  // A block with a transfer under way cannot be evicted: these go back when
  // it lands (OnMigrated).
  send_back_on_arrival_.AddPages(block, arriving);
  return resident | arriving;
}

void MemferryPolicy::OnMigrated(BlockNumber block, const PageMask& pages,
                                TransferKind /*kind*/) {
  const PageMask landed = pages & send_back_on_arrival_.In(block);
  if (landed.none()) return;
  PageSet done;
  done.AddPages(block, landed);
  send_back_on_arrival_.Remove(done);
  SendBack(block, landed & ~device_window_.In(block));
}

void MemferryPolicy::MapPendingPages() {
  for (const auto& [block, mask] : pending_remap_.blocks()) {
    const PageMask wanted = mask & ~device_window_.In(block);
    if (wanted.any()) context().MapRemote(block, wanted);
  }
  pending_remap_ = PageSet();
}

void MemferryPolicy::OnKernelBegin(uint32_t exec_id) {
  if (!planned_) return;
  MapPendingPages();
  const size_t k = next_kernel_++;
  if (!acting_) return;
  if (k >= planned_exec_ids_.size() || planned_exec_ids_[k] != exec_id) {
    // The run left the planned kernels: no more kernel-timed moves in this
    // iteration.
    acting_ = false;
    ++kernels_off_plan_;
    return;
  }
  if (auto it = backward_starts_.find(k); it != backward_starts_.end()) {
    for (size_t l : it->second) {
      uint64_t missing = 0;
      for (const auto& [block, mask] : moved_pages_[l].blocks()) {
        const BlockState* state = context().memory().Find(block);
        missing += (mask & ~(state == nullptr ? PageMask() : state->resident)).count();
      }
      if (missing > 0) {
        ++late_copies_;
        late_copy_bytes_ += missing * kPageSize;
      }
    }
  }
}

void MemferryPolicy::OnKernelEnd(uint32_t /*exec_id*/) {
  if (!planned_ || !acting_ || next_kernel_ == 0) return;
  const size_t k = next_kernel_ - 1;
  const Nanos now = context().now();
  if (auto it = copy_after_.find(k); it != copy_after_.end()) {
    for (size_t l : it->second) {
      QueueCopy(l);
      device_window_.Add(moved_pages_[l]);
      copies_open_.push_back(l);
    }
  }
  if (auto it = release_after_.find(k); it != release_after_.end()) {
    for (size_t l : it->second) Release(l);
  }
  gradient_placement_.OnKernelEnd(context(), k);
  // Gradients mapped remotely are in host memory already: nothing is
  // resident to write back, and the engine skips them.
  for (const TensorMove& move : host_step_.write_back_after[k]) {
    for (const auto& [block, pages] : move.pages) {
      context().PreEvictPages(block, pages, MemoryTier::kHost);
    }
    ++gradients_written_back_;
  }
  if (k + 1 == layers_.backward_begin) forward_end_ = now;
  if (k + 1 == layers_.step_begin) backward_end_ = now;
  if (k + 1 == planned_exec_ids_.size() && forward_end_ >= 0) {
    ++planned_iterations_run_;
    measured_forward_ = forward_end_ - iteration_start_;
    const Nanos backward_end = backward_end_ >= 0 ? backward_end_ : now;
    measured_backward_ = backward_end - forward_end_;
    measured_step_ = now - backward_end;
  }
}

void MemferryPolicy::QueueCopy(size_t layer) {
  const LayerKernels& at = layers_.layers[layer];
  const uint32_t exec_id = planned_exec_ids_[plan_.modes[layer] == ExecutionMode::kGfgb
                                                 ? at.first_forward
                                                 : at.first_backward];
  for (const auto& [block, mask] : moved_pages_[layer].blocks()) {
    context().Prefetch(block, mask, exec_id);
  }
}

bool MemferryPolicy::OnDevice(size_t layer) const {
  for (const auto& [block, mask] : moved_pages_[layer].blocks()) {
    const BlockState* state = context().memory().Find(block);
    if (state == nullptr || (mask & ~(state->resident | state->in_flight)).any()) return false;
  }
  return true;
}

void MemferryPolicy::Release(size_t layer) {
  if (auto open = std::find(copies_open_.begin(), copies_open_.end(), layer);
      open != copies_open_.end()) {
    copies_open_.erase(open);
  }
  if (context().queued_prefetches() > 0) {
    // Part of this layer's copy may still be queued (its backward faulted
    // the pages in first): issued after the release, it would bring them
    // back. The queue holds only this policy's copies, so it is emptied and
    // the others' are queued again, in their order.
    context().CancelPrefetches();
    for (size_t l = 0; l < moved_pages_.size(); ++l) {
      if (plan_.modes[l] == ExecutionMode::kGfgb && !OnDevice(l)) QueueCopy(l);
    }
    for (size_t l : copies_open_) QueueCopy(l);
  }
  device_window_.Remove(moved_pages_[layer]);
  for (const auto& [block, mask] : moved_pages_[layer].blocks()) {
    const PageMask on_device = SendBack(block, mask);
    pending_remap_.AddPages(block, mask & ~on_device);
  }
}

void MemferryPolicy::OnAllocatorEvent(const Event& event) {
  if (!planned_) return;
  gradient_placement_.OnAllocatorEvent(context(), event, acting_);
  if (options_.recycle_freed_pages) freed_pages_.OnAllocatorEvent(context(), event);
  if (event.kind != EventKind::kActivate) return;
  // Parameters live in host memory from the start: what the program's setup
  // writes into them goes there.
  ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/false,
                    [&](BlockNumber block, const PageMask& pages) {
                      const PageMask remote = pages & remote_pages_.In(block);
                      if (remote.any()) context().MapRemote(block, remote);
                    });
}

PageMask MemferryPolicy::MapRemotelyOnFault(BlockNumber block, const PageMask& faulted) {
  return (faulted & remote_pages_.In(block) & ~device_window_.In(block)) |
         gradient_placement_.MapRemotelyOnFault(block, faulted);
}

void MemferryPolicy::ReportStats(PolicyStats& out) const {
  if (!planned_) return;
  uint64_t layers[3] = {0, 0, 0};
  uint64_t bytes[3] = {0, 0, 0};
  for (size_t l = 0; l < plan_.modes.size(); ++l) {
    const int mode = static_cast<int>(plan_.modes[l]);
    ++layers[mode];
    bytes[mode] += layers_.table.layers[l].parameter_bytes;
  }
  for (ExecutionMode mode : {ExecutionMode::kGfgb, ExecutionMode::kDha, ExecutionMode::kDfgb}) {
    const int m = static_cast<int>(mode);
    const std::string name = absl::AsciiStrToLower(ExecutionModeName(mode));
    out.AddCount(absl::StrCat("layers_", name), layers[m]);
    out.AddCount(absl::StrCat("parameter_bytes_", name), bytes[m]);
  }
  out.AddCount("optimizer_on_device", layers_.optimizer_on_device ? 1 : 0);
  out.AddCount("gradients_written_back", gradients_written_back_);
  out.AddCount("freed_bytes_discarded", freed_pages_.discarded_bytes());
  out.AddCount("freed_bytes_populated", freed_pages_.populated_bytes());
  const ScheduleTimes& t = plan_.times;
  out.AddReal("planned_forward_ms", static_cast<double>(t.forward_time) / 1e6);
  out.AddReal("planned_backward_ms", static_cast<double>(t.backward_time) / 1e6);
  out.AddCount("planned_parameter_bytes", t.parameter_bytes);
  out.AddCount("planned_iterations_run", planned_iterations_run_);
  out.AddReal("measured_forward_ms", static_cast<double>(measured_forward_) / 1e6);
  out.AddReal("measured_backward_ms", static_cast<double>(measured_backward_) / 1e6);
  out.AddReal("measured_step_ms", static_cast<double>(measured_step_) / 1e6);
  out.AddCount("dfgb_copies_late", late_copies_);
  out.AddCount("dfgb_late_bytes", late_copy_bytes_);
  out.AddCount("remote_pages_found_resident", pages_left_resident_);
  out.AddCount("kernels_off_plan", kernels_off_plan_);
  if (options_.gradient_reserve.has_value()) ReportGradientStats(out);
}

void MemferryPolicy::ReportGradientStats(PolicyStats& out) const {
  const GradientOffloadPlan& gradients = gradient_plan_.gradients;
  uint64_t layers_offloaded = 0;
  uint64_t bytes_offloaded = 0;
  Nanos cost = 0;  // what offloading costs the backward over keeping every gradient
  const std::vector<GradientCosts> costs = GradientCostsUnder(layers_, plan_.modes);
  for (size_t l = 0; l < gradients.keep_in_device.size(); ++l) {
    if (gradients.keep_in_device[l] || costs[l].gradient_bytes == 0) continue;
    ++layers_offloaded;
    bytes_offloaded += costs[l].gradient_bytes;
    cost += costs[l].backward_to_host - costs[l].backward_in_device;
  }
  out.AddCount("gradient_reserve_bytes", gradients.reserve_bytes);
  out.AddCount("layers_gradients_offloaded", layers_offloaded);
  out.AddCount("gradient_bytes_offloaded", bytes_offloaded);
  out.AddCount("gradient_bytes_kept", gradients.kept_bytes);
  out.AddReal("planned_gradient_cost_ms", static_cast<double>(cost) / 1e6);
  out.AddCount("parameter_budget_bytes", gradient_plan_.parameter_budget_bytes);
  out.AddCount("gradient_layers_replanned",
               static_cast<uint64_t>(gradient_plan_.gradients_replanned));
  out.AddCount("gradients_mapped", gradient_placement_.gradients_mapped());
  out.AddCount("gradient_bytes_found_on_device", gradient_placement_.bytes_found_on_device());
  out.AddCount("peak_gradient_bytes_on_device", gradient_placement_.peak_bytes_on_device());
}

std::vector<ParamInfo> MemferryParams() {
  return {{"dha_criterion", ParamType::kString, "whole-load",
           "Algorithm 1's line 3: a layer goes DHA when its host forward is no slower than its "
           "GPU forward plus its whole load (whole-load, as printed) or plus the part of its load "
           "the reserved time cannot hide (exposed-load)",
           {},
           {"whole-load", "exposed-load"}},
          {"parameter_share", ParamType::kDouble, "1",
           "fraction of the device memory the GFGB and DFGB parameters may take (with "
           "go-memferry, together with the gradients kept); past it the cheapest GFGB layers per "
           "byte go DHA",
           ParamRange::Closed(0, 1)},
          {"modes", ParamType::kString, "plan",
           "plan (the planner's modes), gfgb or dha (every layer in that mode, unplanned: the "
           "baselines)",
           {},
           {"plan", "gfgb", "dha"}},
          FreedPagesParam()};
}

MemferryPolicyOptions MemferryOptionsFrom(const ParamMap& params) {
  MemferryPolicyOptions options;
  options.dha_criterion = params.Choice("dha_criterion") == 0 ? DhaCriterion::kWholeLoad
                                                              : DhaCriterion::kExposedLoad;
  options.parameter_share = params.Double("parameter_share");
  constexpr ModeSource kSources[] = {ModeSource::kPlan, ModeSource::kAllGfgb,
                                     ModeSource::kAllDha};
  options.modes = kSources[params.Choice("modes")];
  options.recycle_freed_pages = RecyclesFreedPages(params);
  return options;
}

UMLAB_REGISTER_POLICY(
    memferry,
    {"memferry",
     "MemFerry (Yao et al.): per layer of parameters, GFGB (copied in at the iteration's "
     "start, kept), DHA (read in host memory through a remote mapping) or DFGB (remote in the "
     "forward, copied in the link's idle window before its backward), chosen by the paper's "
     "Algorithm 1 from umlab's cost model; everything else paged on demand",
     MemferryParams(),
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<MemferryPolicy>(MemferryOptionsFrom(params));
     }});

}  // namespace umlab
