// One block's protocol at one device in a SnuRHAC cluster run
// (cluster_run.h): a fault batch's block, a prefetch or an eviction, and
// the fault batch that waits for its blocks. Internal to the cluster sim.
#ifndef UMLAB_EMU_SNURHAC_CLUSTER_JOB_H_
#define UMLAB_EMU_SNURHAC_CLUSTER_JOB_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "core/memory_units.h"
#include "core/page_mask.h"
#include "emu/snurhac/cluster_device.h"
#include "emu/snurhac/coherence_actions.h"

namespace umlab::snurhac::internal {

enum class JobKind : uint8_t { kFault, kPrefetch, kEvict };

// The protocol for one block at one device: a fault batch's block, a
// prefetch, or an eviction.
struct Job {
  uint64_t id = 0;
  JobKind kind = JobKind::kFault;
  int device = 0;
  BlockNumber block = 0;
  FaultedPages pages;  // fault, prefetch: what to map, and how
  PageMask adjacent;   // fault: pages a read-only block's fault brings along
  PageMask expanded;   // fault: pages the policy's ExpandFault adds
  PrefetchSource source = PrefetchSource::kStatic;  // prefetch
  uint64_t batch = 0;                               // fault
  PageMask evict;                                   // evict: the pages to give up
  uint64_t frame_for = 0;  // evict: the job waiting for this block's frame (0: none)
  bool for_room = false;   // evict: every page mapped when it runs, to free the frame
  FaultPlan plan;
  EvictionPlan eviction;
  int outstanding = 0;  // messages and copies the plan still waits for
  absl::flat_hash_map<PageNumber, uint32_t> versions;  // audit: what the fetches carry
};

// A fault batch in service: its device and the jobs it waits for.
struct Batch {
  int device = 0;
  int outstanding = 0;
};
}  // namespace umlab::snurhac::internal

#endif  // UMLAB_EMU_SNURHAC_CLUSTER_JOB_H_
