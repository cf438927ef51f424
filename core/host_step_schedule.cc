#include "core/host_step_schedule.h"

#include <algorithm>

#include "core/block_range.h"

namespace umlab {
namespace {

BlockPages PagesOf(const GraphTensor& tensor, bool whole_pages_only) {
  BlockPages pages;
  ForEachBlockRange(tensor.address, tensor.size, whole_pages_only,
                    [&](BlockNumber block, const PageMask& mask) {
                      pages.emplace_back(block, mask);
                    });
  return pages;
}

bool SharesABlock(const BlockPages& a, const BlockPages& b) {
  for (const auto& [block, pages] : a) {
    for (const auto& [other, other_pages] : b) {
      if (block == other) return true;
    }
  }
  return false;
}

bool Touches(const GraphKernel& kernel, uint32_t tensor) {
  return std::binary_search(kernel.reads.begin(), kernel.reads.end(), tensor) ||
         std::binary_search(kernel.writes.begin(), kernel.writes.end(), tensor);
}

}  // namespace

HostStepSchedule ScheduleHostStep(const IterationGraph& iteration) {
  const std::vector<GraphKernel>& kernels = iteration.kernels;
  HostStepSchedule schedule;
  schedule.write_back_after.resize(kernels.size());
  schedule.reload_after.resize(kernels.size());
  std::vector<bool> written_back(iteration.tensors.size(), false);
  std::vector<bool> reloaded(iteration.tensors.size(), false);
  for (size_t h = 0; h < kernels.size(); ++h) {
    if (!kernels[h].on_host) continue;
    for (uint32_t tensor : kernels[h].reads) {
      if (written_back[tensor]) continue;
      // The last device kernel before the host kernel that touches it.
      for (size_t k = h; k-- > 0;) {
        if (kernels[k].on_host || !Touches(kernels[k], tensor)) continue;
        BlockPages pages = PagesOf(iteration.tensors[tensor], /*whole_pages_only=*/true);
        if (!pages.empty()) {
          schedule.write_back_after[k].push_back({tensor, std::move(pages), 0});
          schedule.write_back_bytes += iteration.tensors[tensor].size;
        }
        written_back[tensor] = true;
        break;
      }
    }
    for (uint32_t tensor : kernels[h].writes) {
      if (reloaded[tensor]) continue;
      for (const GraphKernel& reader : kernels) {
        if (reader.on_host ||
            !std::binary_search(reader.reads.begin(), reader.reads.end(), tensor)) {
          continue;
        }
        BlockPages pages = PagesOf(iteration.tensors[tensor], /*whole_pages_only=*/false);
        // After the last host kernel of this stretch of the step that
        // touches one of its blocks.
        size_t after = h;
        for (size_t later = h + 1; later < kernels.size() && kernels[later].on_host; ++later) {
          const GraphKernel& step = kernels[later];
          for (const std::vector<uint32_t>* uses : {&step.reads, &step.writes}) {
            for (uint32_t other : *uses) {
              if (SharesABlock(pages, PagesOf(iteration.tensors[other], false))) after = later;
            }
          }
        }
        schedule.reload_after[after].push_back({tensor, std::move(pages), reader.exec_id});
        schedule.reload_bytes += iteration.tensors[tensor].size;
        reloaded[tensor] = true;
        break;
      }
    }
  }
  return schedule;
}

}  // namespace umlab
