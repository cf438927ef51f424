// What a run measured. Field names are the JSON contract's keys (see
// docs/json-contract.md); add fields freely, never rename them.
#ifndef UMLAB_CORE_RUN_STATS_H_
#define UMLAB_CORE_RUN_STATS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "core/memory_units.h"
#include "core/tensor_role.h"

namespace umlab {

struct IterationStats {
  uint64_t faults = 0;
  Nanos time_ns = 0;
  uint64_t h2d_bytes = 0;
  uint64_t d2h_bytes = 0;
  // Not in the required contract, but what A/B tables want per iteration.
  uint64_t faulted_pages = 0;
  uint64_t faulted_in_flight_pages = 0;
  uint64_t prefetch_bytes = 0;
  uint64_t evicted_bytes = 0;
  Nanos stall_ns = 0;
};

struct RunStats {
  // Faults.
  uint64_t faults = 0;          // raw fault-buffer entries, duplicates included
  uint64_t faulted_pages = 0;   // distinct pages per batch, summed over batches
  // Of those, pages already on their way (a prefetch that came too late, or
  // an earlier batch's migration): the fault waited for a transfer rather
  // than starting one. What separates a late prediction from a missed one.
  uint64_t faulted_in_flight_pages = 0;
  uint64_t fault_batches = 0;
  // Blocks a fault brought onto the device: one each time a block without a
  // frame got one because it faulted. The fault count every backend
  // measures the same way (a GPU's raw fault entries are not visible to the
  // host, only profiler groups, and its driver moves whole blocks where the
  // sim may take several batches).
  uint64_t faulted_blocks = 0;
  uint64_t dropped_faults = 0;  // entries lost to fault-buffer overflow
  // Traffic.
  uint64_t h2d_bytes = 0;             // = fault_migrated_bytes + prefetch_bytes
  uint64_t d2h_bytes = 0;             // dirty pages written back
  uint64_t fault_migrated_bytes = 0;  // copied because they faulted
  uint64_t prefetch_bytes = 0;        // copied ahead of need (policy or in-block expansion)
  uint64_t prefetch_useful_bytes = 0; // prefetched and accessed before eviction
  uint64_t zero_filled_bytes = 0;     // populated without a copy (no valid data anywhere)
  uint64_t evicted_bytes = 0;         // resident bytes removed by eviction
  uint64_t invalidated_bytes = 0;     // dropped without write-back
  // The storage tier (a device with storage behind it): the part of h2d
  // read from storage, the part of d2h written to it, and the most data the
  // host and storage held at once as written-back copies.
  uint64_t storage_read_bytes = 0;
  uint64_t storage_write_bytes = 0;
  uint64_t peak_host_bytes = 0;
  uint64_t peak_storage_bytes = 0;
  uint64_t evictions = 0;             // blocks evicted, pre-evictions included
  // Of those, blocks the device evicted by itself (the real driver under
  // real oversubscription); the rest the engine chose.
  uint64_t device_evictions = 0;
  uint64_t pre_evictions = 0;
  uint64_t prefetch_requests = 0;     // queued by the policy
  uint64_t prefetches_dropped = 0;    // refused for want of a frame
  uint64_t peak_used_frames = 0;
  // The most device memory in use at once, in pages resident or arriving
  // (4 KB granularity, where peak_used_frames counts 2 MB frames), and how
  // it split by tensor role at that instant (core/tensor_role.h; the last
  // slot is pages of no known role). All zero by role when the program
  // gives no roles.
  uint64_t peak_device_bytes = 0;
  std::array<uint64_t, kTensorRoleCount + 1> peak_device_bytes_by_role{};
  // Remote mapping (direct host access): bytes mapped, and the bytes the
  // device read and wrote through such mappings (counted by the backend,
  // from the program's access sizes).
  uint64_t remote_mapped_bytes = 0;
  uint64_t remote_read_bytes = 0;
  uint64_t remote_write_bytes = 0;
  // Host kernels (KernelPlace::kHost): how many ran, the bytes written
  // back so the CPU could reach their pages (part of d2h_bytes), and the
  // time they waited for those write-backs and for migrations of their
  // pages to land before they could start.
  uint64_t host_kernels = 0;
  uint64_t host_writeback_bytes = 0;
  Nanos host_wait_ns = 0;
  // Copies (kCopy, docs/hum.md): how many the program made; the bytes of
  // those that ran as DMA (not part of h2d_bytes or d2h_bytes, which count
  // the engine's migrations and write-backs); of prefetch_bytes, what
  // hidden copies landed; the time the host waited on copies (synchronous
  // ones, syncs, and writes to a source whose copy had not landed); the
  // kernels that launched before the copy just before them was done; and
  // faulted pages that waited for a hidden copy to land them.
  uint64_t copies = 0;
  uint64_t dma_h2d_bytes = 0;
  uint64_t dma_d2h_bytes = 0;
  uint64_t hidden_copy_bytes = 0;
  Nanos copy_wait_ns = 0;
  uint64_t early_launches = 0;
  uint64_t faulted_awaiting_copy_pages = 0;
  // Real backends only: the engine learns of faults after the device has
  // already made the page resident, so residency can overshoot the budget
  // until the engine evicts. Estimated at each fault batch.
  uint64_t budget_overshoot_max_bytes = 0;
  uint64_t budget_overshoot_mean_bytes = 0;
  uint64_t fault_records = 0;       // profiler records the faults came in (cuda)
  // cuda: the faults in the program's memory the driver's own event queue
  // told of, one per fault it serviced (fault_records=uvm, or a migration
  // log). 0 elsewhere.
  uint64_t fault_events = 0;
  uint64_t dropped_records = 0;     // profiler records lost under load (cuda)
  // Driver eviction records that began before one of the policy's
  // prefetches refilled the block, and were not applied (cuda).
  uint64_t stale_eviction_records = 0;
  // Of h2d_bytes and d2h_bytes, what the policy's own calls from user space
  // moved (cuda: CUPTI's records of cause user; sim:policy_from=user: the
  // run's engine's calls), the rest being the driver's fault path and its
  // own evictions. They show whether a policy's pre-evictions and
  // prefetches did the moving or found the driver had done it first.
  uint64_t call_h2d_bytes = 0;
  uint64_t call_d2h_bytes = 0;
  // cuda: a lower bound on the device-to-host bytes CUPTI did not record,
  // not part of d2h_bytes (backends/cuda/transfer_ledger.h). 0 elsewhere.
  uint64_t unrecorded_d2h_bytes = 0;
  // cuda: the UVM driver's own byte counters over the run, each way: every
  // migration, where CUPTI's records miss some (uvm_tools_counters.h). 0
  // elsewhere, or where the driver's tools device cannot be read.
  uint64_t uvm_h2d_bytes = 0;
  uint64_t uvm_d2h_bytes = 0;
  // The driver's own heuristics (cuda): regions it found thrashing, and the
  // time it held faults back on them (summed over its throttling records).
  uint64_t thrashing_detections = 0;
  Nanos throttled_ns = 0;
  // Time.
  Nanos time_ns = 0;        // run time (virtual on sim, wall / dilation on uffd, wall on cuda)
  Nanos stall_ns = 0;       // SM time spent stalled on faults, averaged over SMs
  Nanos ideal_time_ns = 0;  // pure compute: the sum of kernel compute times
  Nanos launch_ns = 0;      // gaps between consecutive kernels (launch overhead)
  // Work.
  uint64_t kernels = 0;
  uint64_t page_accesses = 0;

  std::vector<IterationStats> per_iteration;
};

}  // namespace umlab

#endif  // UMLAB_CORE_RUN_STATS_H_
