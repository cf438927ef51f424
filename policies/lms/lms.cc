#include "policies/lms/lms.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/block_range.h"
#include "core/byte_size.h"

namespace umlab {
namespace {

// The 2 MB blocks a tensor spans: the device frames it takes, since a
// frame holds a whole block however few of its pages are resident.
BlockNumber FirstBlock(const LmsPlan::Tensor& tensor) {
  return BlockOfAddress(tensor.address);
}
BlockNumber EndBlock(const LmsPlan::Tensor& tensor) {
  return tensor.size == 0 ? FirstBlock(tensor)
                          : BlockOfAddress(tensor.address + tensor.size - 1) + 1;
}

std::string KernelName(const absl::flat_hash_map<uint32_t, std::string>& names,
                       uint32_t exec_id) {
  auto it = names.find(exec_id);
  return it == names.end() ? absl::StrFormat("with execution id %u", exec_id)
                           : absl::StrFormat("'%s'", it->second);
}

double Gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

}  // namespace

absl::StatusOr<LmsPlan> PlanLms(const IterationGraph& iteration,
                                const absl::flat_hash_map<uint32_t, std::string>& names,
                                const LmsOptions& options, uint64_t capacity_bytes) {
  LmsPlan plan;
  plan.iteration = iteration.index;
  for (const GraphTensor& t : iteration.tensors) {
    plan.tensors.push_back(LmsPlan::Tensor{t.address, t.size, t.global});
  }
  const size_t kernels = iteration.kernels.size();
  plan.exec_ids.resize(kernels);
  plan.uses.resize(kernels);
  plan.blocks.resize(kernels);
  std::vector<int> first_use(plan.tensors.size(), -1);
  for (size_t k = 0; k < kernels; ++k) {
    const GraphKernel& kernel = iteration.kernels[k];
    plan.exec_ids[k] = kernel.exec_id;
    std::set_union(kernel.reads.begin(), kernel.reads.end(), kernel.writes.begin(),
                   kernel.writes.end(), std::back_inserter(plan.uses[k]));
    std::vector<BlockNumber>& blocks = plan.blocks[k];
    for (uint32_t t : plan.uses[k]) {
      LmsPlan::Tensor& tensor = plan.tensors[t];
      if (first_use[t] < 0) first_use[t] = static_cast<int>(k);
      tensor.last_use = static_cast<int>(k);
      for (BlockNumber b = FirstBlock(tensor); b < EndBlock(tensor); ++b) blocks.push_back(b);
    }
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  }

  // Which tensors LMS manages, decided as Caffe decides it for a blob: when
  // it is allocated, by its size and by the memory the program holds then
  // (`demand`, as if nothing were swapped). Globals come first (the model
  // is built before it trains), then each intermediate when its first
  // kernel runs; an intermediate's bytes are given back after its last.
  const double frac_line = options.frac * static_cast<double>(capacity_bytes);
  uint64_t demand = 0;
  // The blocks of the unmanaged tensors alive now, with how many such
  // tensors each holds: what stays on the device beside a kernel's own.
  absl::flat_hash_map<BlockNumber, int> kept_blocks;
  const auto keep = [&](const LmsPlan::Tensor& tensor, int delta) {
    for (BlockNumber b = FirstBlock(tensor); b < EndBlock(tensor); ++b) {
      if ((kept_blocks[b] += delta) == 0) kept_blocks.erase(b);
    }
  };
  const auto allocate = [&](uint32_t t) {
    LmsPlan::Tensor& tensor = plan.tensors[t];
    demand += tensor.size;
    tensor.managed =
        tensor.size >= options.threshold_bytes && static_cast<double>(demand) > frac_line;
    if (tensor.last_use < 0) return;  // no kernel touches it: LMS never moves it
    if (tensor.managed) {
      ++plan.managed_tensors;
      plan.managed_at[tensor.address] = t;
      return;
    }
    if (tensor.size < options.threshold_bytes) {
      ++plan.small_tensors;
    } else {
      ++plan.kept_tensors;
    }
    keep(tensor, +1);
  };
  std::vector<std::vector<uint32_t>> born(kernels), dying(kernels);
  for (uint32_t t = 0; t < plan.tensors.size(); ++t) {
    if (plan.tensors[t].global) {
      allocate(t);
    } else if (first_use[t] >= 0) {
      born[static_cast<size_t>(first_use[t])].push_back(t);
      dying[static_cast<size_t>(plan.tensors[t].last_use)].push_back(t);
    }
  }

  const uint64_t capacity_frames = capacity_bytes / kBlockSize;
  uint64_t largest_need = 0;
  for (size_t k = 0; k < kernels; ++k) {
    for (uint32_t t : born[k]) allocate(t);
    uint64_t need = kept_blocks.size();
    for (BlockNumber b : plan.blocks[k]) need += kept_blocks.contains(b) ? 0 : 1;
    largest_need = std::max(largest_need, need);
    if (need > capacity_frames) {
      const uint64_t own = plan.blocks[k].size();
      return PolicyRefusal(absl::StrFormat(
          "lms: out of memory at kernel %s (kernel %d of %d in iteration %d): it needs %s "
          "(%d bytes) of device memory at once (%s for its %d tensors, %s for the tensors LMS "
          "keeps on the device, in whole 2 MiB blocks) and the device has %s (%d bytes); LMS "
          "cannot run an operation larger than the GPU: give it more --capacity or a smaller "
          "batch",
          KernelName(names, plan.exec_ids[k]), k + 1, kernels, iteration.index,
          FormatBytes(need * kBlockSize), need * kBlockSize, FormatBytes(own * kBlockSize),
          plan.uses[k].size(), FormatBytes((need - own) * kBlockSize),
          FormatBytes(capacity_bytes), capacity_bytes));
    }
    for (uint32_t t : dying[k]) {
      demand -= plan.tensors[t].size;
      if (!plan.tensors[t].managed) keep(plan.tensors[t], -1);
    }
  }
  plan.largest_need_bytes = largest_need * kBlockSize;
  return plan;
}

absl::Status LmsPolicy::Plan(const PlanInput& input) {
  return plans_.TryBuild(input.program, [&](const IterationGraph& iteration) {
    return PlanLms(iteration, input.program.kernel_names, options_, input.capacity_bytes);
  });
}

void LmsPolicy::OnIterationBegin(uint64_t iteration) {
  const LmsPlan* before = plans_.current();
  plans_.BeginIteration(iteration);
  // Tensor numbers belong to a plan: another plan's mean other tensors.
  if (plans_.current() != before) leaving_.clear();
}

void LmsPolicy::OnKernelBegin(uint32_t exec_id) {
  running_ = nullptr;
  const auto [plan, kernel] = plans_.NextKernel();
  if (plan == nullptr) return;  // no plan covers it: leave it to the engine
  if (plan->exec_ids[kernel] != exec_id) {
    ++mismatched_kernels_;  // not the kernel the plan expected: the same
    return;
  }
  running_ = plan;
  running_kernel_ = kernel;
  for (uint32_t t : plan->uses[kernel]) {
    const LmsPlan::Tensor& tensor = plan->tensors[t];
    const uint64_t from_host = SwapIn(tensor, exec_id);
    if (tensor.managed && from_host > 0) {
      ++swap_ins_;
      swap_in_bytes_ += from_host;
    }
  }
}

uint64_t LmsPolicy::SwapIn(const LmsPlan::Tensor& tensor, uint32_t exec_id) {
  uint64_t from_host = 0;
  const MemoryView& memory = context().memory();
  ForEachBlockRange(tensor.address, tensor.size, /*whole_pages_only=*/false,
                    [&](BlockNumber block, const PageMask& pages) {
                      if (const BlockState* state = memory.Find(block); state != nullptr) {
                        from_host += MaskBytes(pages & ~state->resident & ~state->in_flight &
                                               ~state->invalid);
                      }
                      // Populates go before copies in the engine's queues, so
                      // an output does not wait behind its kernel's inputs.
                      context().Populate(block, pages);
                      context().Prefetch(block, pages, exec_id);
                    });
  return from_host;
}

void LmsPolicy::OnKernelEnd(uint32_t /*exec_id*/) {
  if (running_ == nullptr) return;
  const LmsPlan& plan = *running_;
  const size_t kernel = running_kernel_;
  running_ = nullptr;
  // The kernel is over: whatever of its tensors it did not touch, it will
  // not need, and a later kernel asks again for what it needs.
  context().CancelPrefetches();
  const std::vector<uint32_t>& used = plan.uses[kernel];
  const std::vector<uint32_t>& next = plan.uses[(kernel + 1) % plan.kernels()];
  // Dead tensors are not written back: the allocator frees them, and
  // OnAllocatorEvent discards their pages then.
  const auto goes = [&](uint32_t t) {
    const LmsPlan::Tensor& tensor = plan.tensors[t];
    const bool live = tensor.global || tensor.last_use > static_cast<int>(kernel);
    return tensor.managed && live && !std::binary_search(next.begin(), next.end(), t);
  };
  std::vector<uint32_t> candidates;
  for (uint32_t t : used) {
    if (goes(t)) candidates.push_back(t);
  }
  for (uint32_t t : leaving_) {
    if (!std::binary_search(used.begin(), used.end(), t) && goes(t)) candidates.push_back(t);
  }
  leaving_.clear();
  for (const auto& [t, bytes] : SwapOut(plan, candidates)) {
    leaving_.push_back(t);
    if (std::binary_search(used.begin(), used.end(), t)) {
      ++swap_outs_;
      swap_out_bytes_ += bytes;
    } else {
      ++swap_out_retries_;
    }
  }
}

std::vector<std::pair<uint32_t, uint64_t>> LmsPolicy::SwapOut(
    const LmsPlan& plan, const std::vector<uint32_t>& tensors) {
  // In the order the blocks are first met, so runs are reproducible.
  std::vector<std::pair<BlockNumber, PageMask>> requests;
  absl::flat_hash_map<BlockNumber, size_t> request_of;
  std::vector<std::pair<uint32_t, uint64_t>> asked;
  const MemoryView& memory = context().memory();
  for (uint32_t t : tensors) {
    uint64_t bytes = 0;
    // Only whole pages leave: a page shared with a neighbour keeps its bytes.
    ForEachBlockRange(plan.tensors[t].address, plan.tensors[t].size, /*whole_pages_only=*/true,
                      [&](BlockNumber block, const PageMask& pages) {
                        const BlockState* state = memory.Find(block);
                        if (state == nullptr) return;
                        const PageMask here = pages & state->resident;
                        if (here.none()) return;
                        bytes += MaskBytes(here);
                        auto [it, added] = request_of.try_emplace(block, requests.size());
                        if (added) {
                          requests.emplace_back(block, here);
                        } else {
                          requests[it->second].second |= here;
                        }
                      });
    if (bytes > 0) asked.emplace_back(t, bytes);
  }
  for (const auto& [block, pages] : requests) {
    context().PreEvictPages(block, pages, MemoryTier::kHost);
  }
  return asked;
}

void LmsPolicy::OnAllocatorEvent(const Event& event) {
  const LmsPlan* current = plans_.current();
  if (event.kind != EventKind::kDeactivate || current == nullptr) return;
  if (!current->managed_at.contains(event.address)) return;
  // A managed tensor is freed: LMS drops a dead blob instead of copying it
  // back. The engine drops only the pages the allocator now holds free.
  ++discards_;
  ForEachBlockRange(event.address, event.size, /*whole_pages_only=*/true,
                    [&](BlockNumber block, const PageMask& pages) {
                      context().Discard(block, pages);
                    });
}

std::optional<BlockNumber> LmsPolicy::ChooseVictim(const VictimQuery& query) {
  std::optional<BlockNumber> victim;
  if (running_ != nullptr) {
    // Anything but the running operation's data: LMS holds an operation's
    // blobs on the GPU while it runs.
    const std::vector<BlockNumber>& own = running_->blocks[running_kernel_];
    victim = context().memory().LeastRecentlyMigrated(
        [&](const BlockState& block) {
          return !std::binary_search(own.begin(), own.end(), block.number);
        },
        query.for_block);
  }
  // Only the kernel's own blocks are left: its own swap-in must not push
  // out what it has brought (the fault path still may, if it must).
  if (!victim.has_value() && running_ != nullptr && query.reason == VictimReason::kPrefetch) {
    return std::nullopt;
  }
  if (!victim.has_value()) victim = Policy::ChooseVictim(query);
  if (victim.has_value()) ++fallback_victims_;
  return victim;
}

void LmsPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("plans", plans_.distinct());
  if (const LmsPlan* last = plans_.last(); last != nullptr) {
    // The last iteration's plan: the steady one.
    const LmsPlan& plan = *last;
    out.AddCount("managed_tensors", plan.managed_tensors);
    out.AddCount("small_tensors", plan.small_tensors);
    out.AddCount("kept_tensors", plan.kept_tensors);
    out.AddReal("largest_need_gib", Gib(plan.largest_need_bytes));
  }
  out.AddCount("swap_ins", swap_ins_);
  out.AddReal("swap_in_gib", Gib(swap_in_bytes_));
  out.AddCount("swap_outs", swap_outs_);
  out.AddReal("swap_out_gib", Gib(swap_out_bytes_));
  out.AddCount("swap_out_retries", swap_out_retries_);
  out.AddCount("discards", discards_);
  out.AddCount("fallback_victims", fallback_victims_);
  out.AddCount("kernels_unplanned", plans_.unplanned_kernels() + mismatched_kernels_);
}

UMLAB_REGISTER_POLICY(
    lms,
    {"lms",
     "IBM Large Model Support (SysML '18): each kernel's tensors are swapped in when it "
     "begins and, unless the next kernel uses them, swapped out when it ends (written back "
     "if live, discarded if dead); no prefetch; refuses a kernel larger than the device",
     {{"threshold_kb", ParamType::kInt, "1000",
       "tensors under this many KiB stay on the device, never swapped (Caffe-LMS's -lms; its "
       "README's example value, the paper gives none)",
       ParamRange::Closed(0, 1 << 30)},
      {"frac", ParamType::kDouble, "0",
       "LMS swaps only tensors allocated once the program holds more than this fraction of "
       "device memory; earlier ones stay on the device (Caffe-LMS's -lms_frac, default 0)",
       ParamRange::Closed(0, 1)}},
     [](const ParamMap& params) -> absl::StatusOr<std::unique_ptr<Policy>> {
       LmsOptions options;
       options.threshold_bytes = static_cast<uint64_t>(params.Int("threshold_kb")) * 1024;
       options.frac = params.Double("frac");
       return std::make_unique<LmsPolicy>(options);
     }});

}  // namespace umlab
