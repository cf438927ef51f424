#include "policies/g10/flashneuron.h"

#include <algorithm>
#include <iterator>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "policies/g10/tensor_moves.h"

namespace umlab {
namespace {

// The first backward kernel: the first whose name mentions the loss (G10's
// makeLoss, PyTorch's nll_loss_forward...), or else the one after the
// kernel at whose end the most intermediate bytes are alive.
int BackwardStart(const IterationGraph& iteration, const TensorVitality& vitality,
                  const absl::flat_hash_map<uint32_t, std::string>& names) {
  const int kernels = vitality.kernels();
  for (int k = 0; k < kernels; ++k) {
    auto it = names.find(iteration.kernels[static_cast<size_t>(k)].exec_id);
    if (it != names.end() && absl::StrContains(absl::AsciiStrToLower(it->second), "loss")) {
      return k;
    }
  }
  std::vector<double> alive(static_cast<size_t>(kernels) + 1, 0.0);  // difference array
  for (const TensorLife& t : vitality.tensors()) {
    if (t.global || !t.used) continue;
    const int death = t.death == -1 ? t.birth + 1 : t.death;
    alive[static_cast<size_t>(t.birth)] += static_cast<double>(t.bytes);
    alive[static_cast<size_t>(death)] -= static_cast<double>(t.bytes);
  }
  int peak = 0;
  double running = 0, most = -1;
  for (int k = 0; k < kernels; ++k) {
    running += alive[static_cast<size_t>(k)];
    if (running > most) {
      most = running;
      peak = k;
    }
  }
  return std::min(peak + 1, kernels - 1);
}

}  // namespace

absl::StatusOr<FlashNeuronPlan> PlanFlashNeuron(
    const IterationGraph& iteration, const absl::flat_hash_map<uint32_t, std::string>& names,
    uint64_t capacity_bytes) {
  const TensorVitality vitality(iteration);
  const int kernels = vitality.kernels();
  FlashNeuronPlan plan;
  plan.tensors = vitality.tensors();
  const size_t k_count = static_cast<size_t>(kernels);
  plan.uses.resize(k_count);
  plan.offload_at.resize(k_count);
  plan.populate_at.resize(k_count);
  plan.discard_at.resize(k_count);
  plan.offloaded.assign(plan.tensors.size(), false);
  if (kernels == 0) return plan;

  uint64_t globals = 0;
  for (size_t k = 0; k < k_count; ++k) {
    const GraphKernel& kernel = iteration.kernels[k];
    std::set_union(kernel.reads.begin(), kernel.reads.end(), kernel.writes.begin(),
                   kernel.writes.end(), std::back_inserter(plan.uses[k]));
    uint64_t working_set = 0;
    for (uint32_t t : plan.uses[k]) working_set += plan.tensors[t].bytes;
    plan.working_set_bytes = std::max(plan.working_set_bytes, working_set);
  }
  for (uint32_t t = 0; t < plan.tensors.size(); ++t) {
    const TensorLife& tensor = plan.tensors[t];
    if (!tensor.used) continue;
    if (tensor.global) {
      globals += tensor.bytes;
      continue;
    }
    plan.populate_at[static_cast<size_t>(std::max(tensor.birth - 1, 0))].push_back(t);
    const int death = tensor.death == -1 ? tensor.birth + 1 : tensor.death;
    plan.discard_at[static_cast<size_t>(death % kernels)].push_back(t);
  }
  plan.backward_from = BackwardStart(iteration, vitality, names);

  const int64_t room = static_cast<int64_t>(capacity_bytes) - static_cast<int64_t>(globals) -
                       static_cast<int64_t>(plan.working_set_bytes);
  if (room <= 0) {
    return PolicyRefusal(absl::StrFormat(
        "flashneuron: the weights (%s) and the largest kernel's tensors (%s) leave no room for "
        "activations in %s of device memory; FlashNeuron cannot train this model here (G10's "
        "artifact gives up too): give it more --capacity",
        FormatBytes(globals), FormatBytes(plan.working_set_bytes), FormatBytes(capacity_bytes)));
  }
  // Activations: what the forward pass uses and the backward pass needs.
  std::vector<uint32_t> candidates;
  std::vector<bool> seen(plan.tensors.size(), false);
  int64_t remaining = 0;
  for (int k = 0; k < plan.backward_from; ++k) {
    for (uint32_t t : plan.uses[static_cast<size_t>(k)]) {
      const TensorLife& tensor = plan.tensors[t];
      if (tensor.global || tensor.death == -1 || tensor.death <= plan.backward_from || seen[t]) {
        continue;
      }
      seen[t] = true;
      candidates.push_back(t);
      remaining += static_cast<int64_t>(tensor.bytes);
    }
  }
  // Each leaves at the start of its last inactive period in the forward pass.
  std::vector<int> leaves(plan.tensors.size(), -1);
  for (const InactivePeriod& period : vitality.periods()) {
    if (!period.looped && period.start <= plan.backward_from) leaves[period.tensor] = period.start;
  }
  for (uint32_t t : candidates) {
    if (remaining < room) break;
    if (leaves[t] < 0) continue;  // never idle: it cannot go
    plan.offload_at[static_cast<size_t>(leaves[t])].push_back(t);
    plan.offloaded[t] = true;
    plan.offloaded_bytes += plan.tensors[t].bytes;
    remaining -= static_cast<int64_t>(plan.tensors[t].bytes);
  }
  if (remaining > room) {
    return PolicyRefusal(absl::StrFormat(
        "flashneuron: after offloading every activation it can, %s must stay on a device with "
        "%s for activations; FlashNeuron cannot train this model here (G10's artifact gives up "
        "too): give it more --capacity",
        FormatBytes(static_cast<uint64_t>(remaining)), FormatBytes(static_cast<uint64_t>(room))));
  }
  return plan;
}

absl::Status FlashNeuronPolicy::Plan(const PlanInput& input) {
  absl::Status failed;
  plans_.Build(input.program, [&](const IterationGraph& iteration) {
    absl::StatusOr<FlashNeuronPlan> plan =
        PlanFlashNeuron(iteration, input.program.kernel_names, input.capacity_bytes);
    if (!plan.ok()) {
      if (failed.ok()) failed = plan.status();
      return FlashNeuronPlan();
    }
    return *std::move(plan);
  });
  return failed;
}

void FlashNeuronPolicy::OnIterationBegin(uint64_t iteration) {
  plans_.BeginIteration(iteration);
  fetched_.clear();
}

void FlashNeuronPolicy::OnKernelBegin(uint32_t /*exec_id*/) {
  const auto [plan, kernel] = plans_.NextKernel();
  running_ = plan;
  running_kernel_ = kernel;
  if (plan == nullptr) return;
  for (uint32_t t : plan->discard_at[kernel]) {
    DiscardTensor(context(), plan->tensors[t].address, plan->tensors[t].size);
  }
  for (uint32_t t : plan->offload_at[kernel]) {
    ++offloads_;
    fetched_.erase(t);
    PreEvictTensor(context(), plan->tensors[t].address, plan->tensors[t].size,
                   MemoryTier::kStorage);
  }
  for (uint32_t t : plan->populate_at[kernel]) {
    PopulateTensor(context(), plan->tensors[t].address, plan->tensors[t].size);
  }
}

void FlashNeuronPolicy::OnKernelEnd(uint32_t /*exec_id*/) {
  if (running_ == nullptr) return;
  if (static_cast<int>(running_kernel_) >= running_->backward_from) {
    PrefetchAfter(*running_, running_kernel_);
  }
  running_ = nullptr;
}

void FlashNeuronPolicy::PrefetchAfter(const FlashNeuronPlan& plan, size_t kernel) {
  int64_t room = static_cast<int64_t>(context().memory().free_frames() * kBlockSize) -
                 static_cast<int64_t>(plan.working_set_bytes);
  for (size_t next = kernel + 1; next < plan.kernels(); ++next) {
    for (uint32_t t : plan.uses[next]) {
      if (!plan.offloaded[t] || fetched_.contains(t)) continue;
      const TensorLife& tensor = plan.tensors[t];
      if (room <= static_cast<int64_t>(tensor.bytes)) return;
      room -= static_cast<int64_t>(tensor.bytes);
      fetched_.insert(t);
      ++prefetches_;
      PrefetchTensor(context(), tensor.address, tensor.size);
    }
  }
}

void FlashNeuronPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("plans", plans_.distinct());
  if (const FlashNeuronPlan* plan = plans_.last(); plan != nullptr) {
    out.AddCount("backward_from_kernel", static_cast<uint64_t>(plan->backward_from));
    out.AddReal("working_set_gib", static_cast<double>(plan->working_set_bytes) / (1ull << 30));
    out.AddReal("planned_offload_gib", static_cast<double>(plan->offloaded_bytes) / (1ull << 30));
  }
  out.AddCount("offloads", offloads_);
  out.AddCount("prefetches", prefetches_);
  out.AddCount("kernels_unplanned", plans_.unplanned_kernels());
}

UMLAB_REGISTER_POLICY(
    flashneuron,
    {"flashneuron",
     "FlashNeuron (FAST '21) as G10 (MICRO '23) models it: activations offloaded to storage "
     "in the forward pass, prefetched back in the backward pass as memory allows",
     {},
     [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<FlashNeuronPolicy>();
     }});

}  // namespace umlab
