// What a SnuRHAC cluster run is given (emu/snurhac/cluster_sim.h): the
// devices and how they are wired, and which of SnuRHAC's prefetchers run.
// Every default has its source beside it, or says it is an assumption.
#ifndef UMLAB_EMU_SNURHAC_CLUSTER_CONFIG_H_
#define UMLAB_EMU_SNURHAC_CLUSTER_CONFIG_H_

#include <cstdint>

#include "core/device_config.h"
#include "core/memory_units.h"

namespace umlab::snurhac {

// The thesis's largest run (§7.3.2, Figure 7.9: 1 to 32 GPUs).
inline constexpr int kMaxClusterDevices = 32;

// The interconnect between nodes: one port per node, full duplex.
struct NetworkConfig {
  // The thesis's cluster (Table 7.9) is connected by Mellanox InfiniBand
  // EDR: four lanes of 25 Gb/s, 100 Gb/s per direction (IBTA's EDR rate).
  double bytes_per_second = 12.5e9;
  // An assumption: the one-way latency of an RDMA message or transfer,
  // about a microsecond on EDR; the thesis gives no figure.
  Nanos latency_ns = 1000;
};

struct ClusterConfig {
  int devices = 1;
  // Table 7.9: four V100s per node. Devices on one node share its host
  // memory and its network port; device d is on node d / devices_per_node,
  // and node 0 is the host node, where the program and the host's copy of
  // the unified memory live (§6.1).
  int devices_per_node = 4;
  // Every device's: its PCIe link to its node's memory, its compute, its
  // fault path (fault latency, batch, buffer).
  DeviceConfig device;
  // Each device's memory, in 2 MB frames.
  uint64_t capacity_frames = kUnlimitedFrames;
  NetworkConfig network;
  // SnuRHAC's cudaMemcpy between host memory and the host's UM space: a
  // host memcpy on up to eight threads (§6.1). An assumption: eight cores
  // at 7.1 GB/s each, the per-core streaming rate measured on the device
  // machine's Xeon (emu/device_presets.cc, v100-pcie3's host), halved
  // because a copy reads and writes every byte.
  double host_copy_bytes_per_second = 8 * 7.1e9 / 2;
  // SnuRHAC-SP: static prefetching from MAPA's affine ranges (§6.5.1).
  bool static_prefetch = false;
  // The half of SnuRHAC-DP that is the driver's own: a fault on a block
  // with the read-only flag fetches all of its pages (§6.5.2, "adjacent
  // page prefetching"). The other half, correlation prefetching, is the
  // run's policy (policies/snurhac_correlation).
  bool adjacent_prefetch = false;
  // Prefetch commands a device's driver serves at once. The thesis's
  // prefetch scheduler issues them one after another and the driver treats
  // them as faults (§6.5.1) without saying how many overlap: the fault
  // engine's own limit (core/engine.h, prefetch_inflight_limit), an
  // assumption.
  int prefetch_inflight_limit = 4;
  // Check the coherence invariants after every step (tests turn it on).
  bool check_invariants = false;

  int nodes() const { return (devices + devices_per_node - 1) / devices_per_node; }
  int NodeOf(int device_index) const { return device_index / devices_per_node; }
};

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_CLUSTER_CONFIG_H_
