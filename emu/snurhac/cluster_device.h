// One device of a SnuRHAC cluster run (cluster_run.h): its link, fault
// buffer, page table and frames, the issuers running its share of a kernel,
// and its driver's queues. Internal to the cluster sim.
#ifndef UMLAB_EMU_SNURHAC_CLUSTER_DEVICE_H_
#define UMLAB_EMU_SNURHAC_CLUSTER_DEVICE_H_

#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/memory_state.h"
#include "core/policy.h"
#include "emu/device_memory.h"
#include "emu/fault_buffer.h"
#include "emu/pcie_link.h"
#include "emu/snurhac/cluster_config.h"
#include "emu/snurhac/cluster_sim.h"
#include "emu/snurhac/coherence_actions.h"
#include "emu/snurhac/launch_plan.h"

namespace umlab::snurhac::internal {

// Issuers pace their accesses in picoseconds, so that a share's compute
// spread over many accesses accumulates no rounding (as the sim's SMs do).
using Picos = int64_t;
constexpr Picos kPicosPerNano = 1000;

inline Nanos CeilNanos(Picos time) { return (time + kPicosPerNano - 1) / kPicosPerNano; }

inline Nanos BytesTime(uint64_t bytes, double bytes_per_second) {
  return static_cast<Nanos>(std::llround(static_cast<double>(bytes) * 1e9 / bytes_per_second));
}

// One of a device's SMs (or warps), taking pages from the share's cursor.
struct Issuer {
  bool retry = false;  // stalled on `page`: retry it when woken
  PageNumber page = 0;
  bool write = false;
};

// Who asked for a prefetch, for the statistics.
enum class PrefetchSource : uint8_t { kStatic, kPolicy };

struct PrefetchRequest {
  BlockNumber block = 0;
  FaultedPages pages;
  PrefetchSource source = PrefetchSource::kStatic;
};

class ClusterRun;

// What a device's policy may ask of the cluster (core/policy.h). The
// cluster carries out prefetches and pins; the other requests belong to
// single-device runs (storage tiers, remote mapping, allocator discards)
// and fail the run with a message naming them.
class DeviceContext final : public PolicyContext {
 public:
  DeviceContext(ClusterRun& run, int device) : run_(run), device_(device) {}

  const MemoryView& memory() const override;
  Nanos now() const override;
  uint32_t current_exec_id() const override;
  void Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) override;
  void Populate(BlockNumber, const PageMask&) override { Refuse("Populate"); }
  void CancelPrefetches() override;
  size_t queued_prefetches() const override;
  void PreEvict(BlockNumber) override { Refuse("PreEvict"); }
  void PreEvictPages(BlockNumber, const PageMask&, MemoryTier) override { Refuse("PreEvictPages"); }
  void Discard(BlockNumber, const PageMask&) override { Refuse("Discard"); }
  void SetPinned(BlockNumber block, bool pinned) override;
  void MapRemote(BlockNumber, const PageMask&) override { Refuse("MapRemote"); }
  void UnmapRemote(BlockNumber, const PageMask&) override { Refuse("UnmapRemote"); }

 private:
  void Refuse(const char* request);

  ClusterRun& run_;
  int device_;
};

// A device and its driver's state. Devices are numbered from 0; device d
// is on node d / devices_per_node.
struct Device {
  Device(int index_, const ClusterConfig& config)
      : index(index_),
        node(config.NodeOf(index_)),
        link(config.device.link),
        faults(static_cast<size_t>(config.device.fault_buffer_entries)),
        memory(config.capacity_frames),
        frames(config.capacity_frames) {}

  int index;
  int node;
  PcieLink link;  // to its node's memory
  FaultBuffer faults;
  DeviceMemory memory;                                  // the page table and its frames
  absl::flat_hash_map<BlockNumber, PageMask> writable;  // mapped with write permission
  MemoryState frames;  // frames claimed, and the migration order (the policy's view)
  std::unique_ptr<Policy> policy;
  std::unique_ptr<DeviceContext> context;

  // The running share.
  bool running = false;
  std::vector<PageRun> runs;
  size_t run = 0;
  uint64_t offset = 0;
  Picos step_ps = 0;
  std::vector<Issuer> issuers;
  int issuers_active = 0;
  Nanos share_start = 0;
  std::vector<uint32_t> stalled;

  // The driver.
  bool servicing = false;
  bool service_scheduled = false;
  std::deque<PrefetchRequest> policy_queue;  // the policy's prefetches
  std::deque<PrefetchRequest> static_queue;  // the runtime's, from MAPA
  int prefetches_in_flight = 0;
  // Jobs per block, in order; the first runs. A device runs one protocol
  // per block at a time: it asks for a block's lock once.
  absl::flat_hash_map<BlockNumber, std::deque<uint64_t>> block_jobs;
  std::deque<uint64_t> waiting_for_frame;

  ClusterDeviceStats stats;

  PageMask Writable(BlockNumber block) const {
    auto it = writable.find(block);
    return it == writable.end() ? PageMask() : it->second;
  }
  bool Permits(PageNumber page, bool write) const {
    if (!write) return memory.IsMapped(page);
    auto it = writable.find(BlockOfPage(page));
    return it != writable.end() && it->second.test(PageIndexInBlock(page));
  }
};

}  // namespace umlab::snurhac::internal

#endif  // UMLAB_EMU_SNURHAC_CLUSTER_DEVICE_H_
