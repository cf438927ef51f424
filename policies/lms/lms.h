// `lms`: IBM's Large Model Support (Cho et al., "Large Model Support for
// Deep Learning in Caffe and Chainer", SysML '18), as its Caffe
// implementation does it (github.com/ibmsoe/caffe, branch master-lms:
// syncedmem.cpp and net.cpp). GPU memory is a cache of host memory, one
// operation at a time:
//   - swap-in before each operation: when a kernel begins, the tensors it
//     reads and writes are brought in (their empty pages populated, the rest
//     copied). Nothing is fetched ahead of the kernel that needs it: the
//     Caffe code fetches a blob when its layer asks for it, and its README
//     says why there is no prefetching (it "decreases the maximum LMS
//     capability", since memory would then hold more than one layer);
//   - swap-out after it: when a kernel ends, each tensor it used that the
//     next kernel does not use leaves the device. A live one (used later in
//     the iteration, or a weight or optimizer state) is written back, which
//     the engine does only for its dirty pages; a dead one is discarded, not
//     written back, when the allocator frees it;
//   - the `lms` threshold (`threshold_kb`): a tensor under it stays on the
//     device and is never swapped;
//   - `lms_frac` (`frac`): Caffe decides once per blob, when it is
//     allocated, whether LMS manages it: only when the memory the program
//     has asked for by then, that blob included, exceeds `frac` of the
//     device. The tensors allocated before that line stay on the device;
//   - out of memory: when one kernel needs more than the device holds (its
//     tensors, plus the tensors LMS keeps on the device that are alive
//     then), LMS fails, as Caffe fails in cudaMalloc. Plan() refuses the
//     program in one line that names the kernel; it never falls back to
//     paging the kernel's own data in and out.
// Pages the plan did not account for (a tensor's edges shared with a
// neighbour, memory outside any tensor) are still evicted by the engine
// when a frame is short, least recently migrated first but never from the
// running kernel's tensors; `fallback_victims` counts those evictions.
#ifndef UMLAB_POLICIES_LMS_LMS_H_
#define UMLAB_POLICIES_LMS_LMS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/iteration_plans.h"
#include "core/policy.h"

namespace umlab {

struct LmsOptions {
  // Caffe's `-lms N`: blobs of N KB (N x 1024 bytes) or more are swapped.
  uint64_t threshold_bytes = 1000 * 1024;
  // Caffe's `-lms_frac`.
  double frac = 0;
};

// What LMS does in one iteration of the program, kernel by kernel.
struct LmsPlan {
  struct Tensor {
    uint64_t address = 0;
    uint64_t size = 0;
    bool global = false;   // its data outlives the iteration (core/program_graph.h)
    bool managed = false;  // LMS swaps it; otherwise it stays on the device
    int last_use = -1;     // the last kernel that reads or writes it; -1: none
  };
  uint64_t iteration = 0;  // the graph's iteration index
  std::vector<Tensor> tensors;
  std::vector<uint32_t> exec_ids;                // per kernel
  std::vector<std::vector<uint32_t>> uses;       // per kernel: its tensors, ascending
  std::vector<std::vector<BlockNumber>> blocks;  // per kernel: the blocks they span, ascending
  absl::flat_hash_map<uint64_t, uint32_t> managed_at;  // managed tensors by address
  uint64_t small_tensors = 0;  // used, and under the threshold
  uint64_t kept_tensors = 0;   // used, over the threshold, allocated before the frac line
  uint64_t managed_tensors = 0;
  // The most device memory one kernel needs, in whole 2 MB blocks: its own
  // tensors and the unmanaged tensors alive while it runs.
  uint64_t largest_need_bytes = 0;
  size_t kernels() const { return uses.size(); }
};

// Plans one iteration for a device of `capacity_bytes`; refuses
// (PolicyRefusal) when a kernel needs more than that. `names` are the
// program's kernel names, for the message.
absl::StatusOr<LmsPlan> PlanLms(const IterationGraph& iteration,
                                const absl::flat_hash_map<uint32_t, std::string>& names,
                                const LmsOptions& options, uint64_t capacity_bytes);

class LmsPolicy final : public Policy {
 public:
  explicit LmsPolicy(const LmsOptions& options) : options_(options) {}

  bool PlansAhead() const override { return true; }
  absl::Status Plan(const PlanInput& input) override;
  void OnIterationBegin(uint64_t iteration) override;
  void OnKernelBegin(uint32_t exec_id) override;
  void OnKernelEnd(uint32_t exec_id) override;
  void OnAllocatorEvent(const Event& event) override;
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& query) override;
  // Pages the allocator has freed are garbage: dropped, never written back.
  PageMask PagesToDrop(const BlockState& victim) override { return victim.inactive; }
  void ReportStats(PolicyStats& out) const override;

 private:
  // Brings the tensor's pages in: those with no data are populated, the
  // others copied. Returns the bytes that had to come from the host.
  uint64_t SwapIn(const LmsPlan::Tensor& tensor, uint32_t exec_id);
  // Asks the pages of `tensors` still on the device to leave, one request
  // per block (the engine skips a block with a transfer in flight, so two
  // requests for one block would lose the second). Returns the tensors
  // that had pages to ask for, with those pages' bytes.
  std::vector<std::pair<uint32_t, uint64_t>> SwapOut(const LmsPlan& plan,
                                                     const std::vector<uint32_t>& tensors);

  LmsOptions options_;
  IterationPlans<LmsPlan> plans_;
  const LmsPlan* running_ = nullptr;  // set between a planned kernel's begin and end
  size_t running_kernel_ = 0;
  // Tensors asked to leave at the last kernel end; the next end asks again
  // for the pages of any whose block was busy then.
  std::vector<uint32_t> leaving_;
  // Kernels a plan covered but that were not the ones it expected.
  uint64_t mismatched_kernels_ = 0;
  uint64_t swap_ins_ = 0;
  uint64_t swap_in_bytes_ = 0;
  uint64_t swap_outs_ = 0;
  uint64_t swap_out_bytes_ = 0;
  uint64_t swap_out_retries_ = 0;
  uint64_t discards_ = 0;
  uint64_t fallback_victims_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_LMS_LMS_H_
