// SnuRHAC on N emulated devices in one deterministic virtual-time run
// (DeepUM thesis ch. 6): the reference for SnuRHAC in umlab.
//
// What runs, per kernel launch of a grid program (core/grid_program.h):
//  - the launch (§6.2, §6.4): the grid is split over the devices
//    (grid_split.h), or the kernel goes to device 0 alone if it uses
//    atomics or its devices' MAPA write ranges overlap above 0.5
//    (execution_mode.h); blocks of arrays the kernel only reads get the
//    read-only flag, others lose it; the launch reaches devices off the
//    host node one network latency later;
//  - each device runs its share: `sms x warps_per_sm` issuers take the
//    share's pages, access by access in address order, from one cursor,
//    computing for the share's compute time spread over its accesses
//    (core/access_pace.h), as the single-device sim's SMs do. A page the
//    device does not map, or maps read-only for a write, faults into the
//    device's fault buffer and stalls its issuer until the next replay;
//  - each device's driver services its faults (§6.3): it fetches a batch,
//    groups it by block, and after the fault latency runs the 12-step
//    protocol for every faulted block at once (the pipelining of §6.3):
//    lock request to the block's descriptor owner and its grant, the fault
//    list and the reply naming the page owners (coherence_directory.h),
//    page requests to the owners, which downgrade and copy: a device owner
//    through its node's memory (its link's device-to-host lane, then the
//    network if the faulting device is on another node, then the faulting
//    device's host-to-device lane), the host from node 0's memory; then the
//    mapping, the unlock, and once the whole batch is in, the replay;
//  - a device that needs a frame and has none evicts a block first, by
//    umlab's eviction rule: it takes the victim's lock, writes back what
//    the rule says, unmaps, unlocks; the victim is the policy's choice
//    (least recently migrated by default);
//  - at the kernel's end, once every device is done and every lock is free,
//    the directory's kernel-end unmaps (one network latency for the devices'
//    reports, one for the next launch, off a single node).
// Before the first kernel the program's inputs are copied into the host's
// UM space (a host memcpy, §6.1); after the last, its outputs are read back:
// every device gives up its pages of them (evicted by the same rule) and the
// host copies them out. Pages that have never held data (arrays the host
// did not copy in, before anything is written back) are zero-filled at the
// device that first touches them, as UVM populates a GPU's first touch:
// the host sends no bytes for them.
//
// Prefetching (§6.5): with `static_prefetch`, each device's share of each
// analysable access, as MAPA's representative threads bound it, is queued
// at the launch (access type kept: a write range is fetched for writing);
// with `adjacent_prefetch`, a fault on a read-only block brings the block's
// every page of its array; the policy (one per device, core/policy.h) sees
// the faults on the other blocks and may queue prefetches of any pages, as
// snurhac-correlation does. Prefetches go through the same protocol at the
// links' lowest priority, the policy's before the static ones, at most
// `prefetch_inflight_limit` per device at once.
//
// Messages between devices of one node cost nothing; between nodes, one
// network latency each (their bytes are few). Bulk data moves on the
// modelled links (emu/pcie_link.h): every device's PCIe link, and every
// node's network port, of which a transfer occupies the sending node's.
//
// Same program and configuration: byte-identical results. The run itself
// is cluster_run.h (the loop and the kernels in cluster_run.cc, the
// protocol in cluster_protocol.cc, a device's state in cluster_device.h).
#ifndef UMLAB_EMU_SNURHAC_CLUSTER_SIM_H_
#define UMLAB_EMU_SNURHAC_CLUSTER_SIM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/grid_program.h"
#include "core/policy.h"
#include "core/policy_stats.h"
#include "emu/snurhac/cluster_config.h"

namespace umlab::snurhac {

// What one device did.
struct ClusterDeviceStats {
  uint64_t faults = 0;          // fault-buffer entries, duplicates included
  uint64_t dropped_faults = 0;  // entries lost to a full buffer
  uint64_t fault_batches = 0;
  uint64_t faulted_pages = 0;            // distinct pages per batch, summed
  uint64_t lock_waits = 0;               // lock requests that were queued
  uint64_t host_fetch_bytes = 0;         // pages fetched from the host's memory
  uint64_t zero_filled_bytes = 0;        // pages with no data yet, populated in place
  uint64_t peer_fetch_bytes = 0;         // pages fetched from another device
  uint64_t upgrades = 0;                 // pages whose protection was raised in place
  uint64_t downgrades = 0;               // pages this device lost write permission to
  uint64_t static_prefetch_bytes = 0;    // brought by static prefetching
  uint64_t adjacent_prefetch_bytes = 0;  // brought with a read-only block's fault
  uint64_t policy_prefetch_bytes = 0;    // brought by the policy's prefetches
  uint64_t evictions = 0;                // blocks evicted to make room
  uint64_t write_back_bytes = 0;
  uint64_t kernel_end_unmapped_pages = 0;
  uint64_t peak_frames = 0;
  Nanos busy_ns = 0;  // time running its shares (launch to its last access)

  // Sums another device's counters into these (peak_frames: the larger).
  void Add(const ClusterDeviceStats& other);
};

struct ClusterResult {
  Nanos time_ns = 0;  // the whole program: copies in, kernels, copies out
  Nanos copy_in_ns = 0;
  Nanos kernels_ns = 0;  // first launch to last kernel end
  Nanos copy_out_ns = 0;
  int kernels = 0;
  int single_device_kernels = 0;  // sent to one device by §6.4's rule
  uint64_t network_bytes = 0;     // bulk bytes over the network ports
  std::vector<ClusterDeviceStats> devices;
  ClusterDeviceStats total;         // summed over devices (peak_frames: the largest)
  PolicyStats policy_stats;         // device 0's policy's
  uint64_t policy_table_bytes = 0;  // summed over devices
  uint64_t invariant_checks = 0;    // steps checked (with check_invariants)
};

// Makes the policy of one device.
using DevicePolicyFactory = std::function<absl::StatusOr<std::unique_ptr<Policy>>(int device)>;

// Runs `program` on the cluster. Fails on an invalid program or
// configuration, a policy request the cluster does not carry out, a
// protocol error, or (with check_invariants) the first broken invariant.
absl::StatusOr<ClusterResult> RunCluster(const GridProgram& program, const ClusterConfig& config,
                                         const DevicePolicyFactory& policies);

// The thesis's baseline (§7.3.2: "the original CUDA runtime ... does not
// use UM"): the program on one device with explicit copies over its link,
// inputs before the first kernel and outputs after the last, and every
// kernel's compute time.
Nanos ExplicitCopyTime(const GridProgram& program, const DeviceConfig& device);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_CLUSTER_SIM_H_
