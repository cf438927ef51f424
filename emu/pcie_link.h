// A full-duplex PCIe link in discrete time.
//
// Each direction moves one transfer at a time, taking latency + bytes/bandwidth
// (plus the eviction overhead for device-to-host); a half-duplex link
// (LinkConfig::full_duplex false) moves one transfer at a time in all.
//
// With storage behind the device (LinkConfig::storage), a transfer from or
// to storage moves on a lane of its own in its direction, beside the host's,
// as G10's simulator lets SSD and host pages share each PCIe batch: it takes
// the link's latency and the drive's, and its bytes at the slower of the
// link and the drive. While a storage lane is busy, a host transfer starting
// in the same direction gets what the drive leaves of the link (G10 caps a
// batch's pages at the link's rate, the SSD's share at the drive's). It keeps
// that rate to its end even if the drive goes idle first: slightly slow.
// Remote accesses (LinkTransfer::remote) share the lanes with migrations
// at the link's remote rates.
// Waiting transfers start by priority (fault migrations > evictions >
// prefetches), first come first served within a priority, and never before
// their ready time or before the transfer they depend on has finished. A
// transfer with no bytes to copy (a zero-fill populate, a clean eviction)
// does not occupy the link: it completes once ready, unless it is a
// policy's call that populates, which occupies its lane for the link's
// latency and populate overhead.
//
// The link does not own a clock: the caller asks for the next event time,
// moves its clock there and calls ProcessEventsAt.
#ifndef UMLAB_EMU_PCIE_LINK_H_
#define UMLAB_EMU_PCIE_LINK_H_

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "core/device_config.h"
#include "core/memory_units.h"
#include "core/transfer.h"

namespace umlab {

enum class LinkDirection : uint8_t { kHostToDevice = 0, kDeviceToHost = 1 };

struct LinkTransfer {
  TransferId id = 0;
  LinkDirection direction = LinkDirection::kHostToDevice;
  TransferKind priority = TransferKind::kFaultMigration;
  uint64_t bytes = 0;
  Nanos ready_ns = 0;    // may not start before
  TransferId after = 0;  // may not start before this one finished (0: none)
  // Device to host: the driver evicting a block to make room, which pays
  // LinkConfig::eviction_overhead_ns. A policy's call from user space that
  // moves a block back (cudaMemPrefetchAsync to the host) does not: on the
  // H200 it took no longer than its copy (docs/devices.md).
  bool evicts_for_room = true;
  // Host to device: the driver's fault path bringing pages a fault needs
  // (and what its prefetcher adds), at LinkConfig::fault_h2d_rate(), each
  // paying LinkConfig::fault_block_overhead_ns.
  bool fault_path = false;
  // With fault_path: pages it zero-fills, with no bytes to copy. It still
  // takes its turn on the lane and pays the fault path's overhead.
  bool fault_zero_fill = false;
  // Host to device: a policy's prefetch call (`policy_from=user`), which
  // moves on a lane of its own with LinkConfig::prefetch_calls_beside_faults.
  bool prefetch_call = false;
  // Host to device: a policy's call that populates pages with no data (a
  // zero-fill), which pays LinkConfig::populate_overhead_ns even when it
  // copies nothing.
  bool populates = false;
  // Of `bytes`, those read from or written to storage. Any makes the whole
  // transfer a storage one (the engine sends a block's copy to one tier).
  uint64_t storage_bytes = 0;
  // A program's own copy (cudaMemcpy, a DMA): it moves at the link's copy
  // rates (LinkConfig::dma_h2d_rate, dma_d2h_rate).
  bool dma = false;
  // The device's own reads (host to device) or writes (device to host)
  // through a remote mapping: they move at the link's remote rates and pay
  // no per-transfer latency on the lane, since many are in flight at once
  // (the accessor waits LinkConfig::remote_latency_ns on top).
  bool remote = false;
};

class PcieLink {
 public:
  explicit PcieLink(const LinkConfig& config);

  // Modelled duration of a transfer of `bytes` in one direction: to or from
  // host memory with the whole link (`storage_busy` false) or beside a busy
  // storage lane, or to or from storage (`via_storage`).
  Nanos Duration(LinkDirection direction, uint64_t bytes, bool evicts_for_room = true,
                 bool via_storage = false, bool storage_busy = false,
                 bool fault_path = false) const;
  // Whether the fault path takes time for a migration with no bytes (a
  // zero-fill): only where it has an overhead of its own
  // (LinkConfig::fault_block_overhead_ns), which is then all it costs.
  // Without one, such a migration is done at once and holds no lane.
  bool FaultPathWorksWithoutBytes(LinkDirection direction, bool fault_path) const;
  // A program's copy (LinkTransfer::dma): latency + bytes at the copy rate.
  Nanos DmaDuration(LinkDirection direction, uint64_t bytes) const;

  // A remote access's time on its lane: its bytes at the remote rate.
  Nanos RemoteDuration(LinkDirection direction, uint64_t bytes) const;

  // Lanes: host-to-device, device-to-host, then the same two for storage
  // (with a storage tier); half duplex: everything in lane 0. The last is a
  // policy's prefetch calls' with LinkConfig::prefetch_calls_beside_faults.
  // The uffd throttle books the same lanes.
  static constexpr int kLanes = 5;
  static constexpr int kPrefetchCallLane = 4;
  bool has_storage() const { return config_.storage.present; }
  int LaneOf(LinkDirection direction, bool via_storage) const;
  int LaneOf(const LinkTransfer& transfer) const;
  // The storage lane that shares the link with host lane `lane` (full duplex
  // only), or -1.
  int StorageLaneBeside(int lane) const;

  void Submit(const LinkTransfer& transfer, Nanos now);

  // When something next happens (a start or a completion); kNever if idle.
  Nanos NextEventTime() const;
  // Handles everything that happens at `now`, appending the transfers that
  // finished, in a deterministic order.
  void ProcessEventsAt(Nanos now, std::vector<TransferId>& completed);

  bool idle() const;
  uint64_t bytes_moved(LinkDirection direction) const {
    return bytes_moved_[static_cast<int>(direction)];
  }
  Nanos busy_ns(LinkDirection direction) const {
    return busy_ns_[static_cast<int>(direction)];
  }

 private:
  struct Lane {
    std::array<std::deque<LinkTransfer>, 3> waiting;  // by priority
    bool active = false;
    LinkTransfer current;
    Nanos end_ns = 0;
  };

  void Enqueue(const LinkTransfer& transfer, Nanos now);
  void StartNext(int lane_index, Nanos now);
  Nanos LaneNextEvent(const Lane& lane) const;
  void Complete(TransferId id, Nanos now, std::vector<TransferId>& completed);

  LinkConfig config_;
  std::array<Lane, kLanes> lanes_;
  // Zero-byte transfers that are ready, by completion time.
  std::vector<std::pair<Nanos, TransferId>> instant_;
  // Transfers waiting for another one to finish, keyed by that one's id.
  absl::flat_hash_map<TransferId, std::vector<LinkTransfer>> blocked_;
  // Submitted and not yet finished: a dependency on anything else is met.
  absl::flat_hash_set<TransferId> unfinished_;
  std::array<uint64_t, 2> bytes_moved_{};
  std::array<Nanos, 2> busy_ns_{};
};

}  // namespace umlab

#endif  // UMLAB_EMU_PCIE_LINK_H_
