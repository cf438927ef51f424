// When an iteration's host kernels (KernelPlace::kHost: ZeRO-Offload's
// optimizer step on the CPU) want their tensors moved, read from the
// program graph: what a policy that overlaps those moves with the GPU's
// work issues, kernel by kernel.
//
// - Write-back: a tensor a host kernel reads (a gradient) leaves the device
//   at that kernel's begin at the latest (Engine::ClaimForHost). It can
//   leave as soon as the last device kernel before it that touches it has
//   ended, overlapping the rest of the backward, as ZeRO-Offload streams
//   each gradient to the CPU once the backward has produced it.
// - Reload: a tensor a host kernel writes (a parameter) has no device copy
//   after it; if a device kernel of the iteration reads it, it can come
//   back as soon as the host kernel ends, overlapping the rest of the step,
//   as ZeRO-Offload copies each updated parameter back while the CPU
//   updates the next. Not before the last host kernel that touches one of
//   its 2 MB blocks, though: that kernel's claim would wait for the copy
//   (a block moves under one lock, Engine::ClaimForHost) and take the
//   block's pages back off the device.
//
// Both lists hold the tensors' pages, whole pages only for write-backs (a
// page shared with a neighbour still in use stays, and leaves at the host
// kernel's claim); a program with no host kernels gets empty lists.
#ifndef UMLAB_CORE_HOST_STEP_SCHEDULE_H_
#define UMLAB_CORE_HOST_STEP_SCHEDULE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "core/memory_units.h"
#include "core/page_mask.h"
#include "core/program_graph.h"

namespace umlab {

// A tensor's pages, block by block.
using BlockPages = std::vector<std::pair<BlockNumber, PageMask>>;

struct TensorMove {
  uint32_t tensor = 0;         // in IterationGraph::tensors
  BlockPages pages;
  // Reload: the first device kernel of the iteration that reads it (its
  // exec id, for the prefetch); write-back: 0.
  uint32_t reader_exec_id = 0;
};

struct HostStepSchedule {
  // Per kernel of the iteration: what to write back and what to reload
  // once it ends.
  std::vector<std::vector<TensorMove>> write_back_after;
  std::vector<std::vector<TensorMove>> reload_after;
  uint64_t write_back_bytes = 0;  // tensors' bytes, each counted once
  uint64_t reload_bytes = 0;
  size_t kernels() const { return write_back_after.size(); }
};

HostStepSchedule ScheduleHostStep(const IterationGraph& iteration);

}  // namespace umlab

#endif  // UMLAB_CORE_HOST_STEP_SCHEDULE_H_
