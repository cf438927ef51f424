#include "policies/g10/g10.h"

#include <memory>

#include "policies/g10/tensor_moves.h"

namespace umlab {

absl::Status G10Policy::Plan(const PlanInput& input) {
  plans_.Build(input.program, [&](const IterationGraph& iteration) {
    return PlanIteration(iteration, input.device, input.capacity_bytes, options_);
  });
  return absl::OkStatus();
}

void G10Policy::OnIterationBegin(uint64_t iteration) { plans_.BeginIteration(iteration); }

void G10Policy::OnKernelBegin(uint32_t /*exec_id*/) {
  const auto [plan, kernel] = plans_.NextKernel();
  if (plan == nullptr) return;
  for (const Movement& movement : plan->at_kernel[kernel]) Carry(*plan, movement);
}

void G10Policy::Carry(const G10Plan& plan, const Movement& movement) {
  const TensorLife& tensor = plan.tensors[movement.tensor];
  ++movements_carried_;
  switch (movement.kind) {
    case MovementKind::kDeallocate:
      DiscardTensor(context(), tensor.address, tensor.size);
      break;
    case MovementKind::kPreEvict:
      PreEvictTensor(context(), tensor.address, tensor.size, movement.tier);
      break;
    case MovementKind::kPreallocate:
      PopulateTensor(context(), tensor.address, tensor.size);
      break;
    case MovementKind::kPrefetch:
      PrefetchTensor(context(), tensor.address, tensor.size);
      break;
  }
}

void G10Policy::ReportStats(PolicyStats& out) const {
  out.AddCount("plans", plans_.distinct());
  // The plan of the last iteration: the steady one.
  if (const G10Plan* last = plans_.last(); last != nullptr) {
    const G10Plan& plan = *last;
    out.AddCount("inactive_periods", plan.periods);
    out.AddCount("planned_evictions_to_host", plan.evictions_to_host);
    out.AddCount("planned_evictions_to_storage", plan.evictions_to_storage);
    out.AddCount("planned_prefetches", plan.prefetches);
    out.AddCount("planned_preallocations", plan.preallocations);
    out.AddCount("planned_deallocations", plan.deallocations);
    out.AddReal("estimate_peak_gib", plan.peak_estimate_bytes / (1ull << 30));
    out.AddReal("planned_peak_gib", plan.planned_peak_bytes / (1ull << 30));
    out.AddReal("line_gib", plan.line_bytes / (1ull << 30));
  }
  out.AddCount("movements_carried", movements_carried_);
  out.AddCount("kernels_unplanned", plans_.unplanned_kernels());
}

UMLAB_REGISTER_POLICY(
    g10, {"g10",
          "G10 (MICRO '23): plans over the program before it runs (tensor vitality, smart "
          "eviction to host or storage, eager prefetch), then pre-evicts, prefetches, "
          "pre-allocates and discards tensors at kernel boundaries",
          {{"delta", ParamType::kDouble, "0.5",
            "margin on each movement's estimated time, as a fraction of it (G10's "
            "delta_parameter)",
            ParamRange::Closed(0, 100)},
           {"line", ParamType::kDouble, "0.99",
            "fraction of device memory the plan may fill", ParamRange::OpenClosed(0, 1)}},
          [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
            G10Options options;
            options.delta = params.Double("delta");
            options.line = params.Double("line");
            return std::make_unique<G10Policy>(options);
          }});

}  // namespace umlab
