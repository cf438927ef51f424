// The cluster sim's run (cluster_sim.h says what it models): the devices,
// the network ports, the directory, and the event loop that drives them in
// virtual time. Internal: RunCluster is its interface. Its members are
// defined in cluster_run.cc (the loop, the kernels, the copies) and
// cluster_protocol.cc (fault service, the 12 steps, eviction, prefetch).
#ifndef UMLAB_EMU_SNURHAC_CLUSTER_RUN_H_
#define UMLAB_EMU_SNURHAC_CLUSTER_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/grid_program.h"
#include "core/policy.h"
#include "emu/pcie_link.h"
#include "emu/snurhac/cluster_config.h"
#include "emu/snurhac/cluster_device.h"
#include "emu/snurhac/cluster_job.h"
#include "emu/snurhac/cluster_sim.h"
#include "emu/snurhac/coherence_audit.h"
#include "emu/snurhac/coherence_directory.h"

namespace umlab::snurhac::internal {

class ClusterRun final : private DeviceMappings {
 public:
  ClusterRun(const GridProgram& program, const ClusterConfig& config)
      : program_(program), config_(config), directory_(config.devices) {}

  absl::StatusOr<ClusterResult> Run(const DevicePolicyFactory& policies);

  // For DeviceContext.
  Device& device(int index) { return *devices_[index]; }
  Nanos now() const { return now_; }
  uint32_t exec_id() const { return exec_id_; }
  void RequestPrefetch(int device, BlockNumber block, const FaultedPages& pages,
                       PrefetchSource source);
  void Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
  }

 private:
  // DeviceMappings, for the audit.
  bool Maps(int device, PageNumber page) const override {
    return devices_[device]->memory.IsMapped(page);
  }
  bool MapsWritable(int device, PageNumber page) const override {
    return devices_[device]->Permits(page, true);
  }

  // --- The event loop ---
  // An action due at `time`; actions due at once run in the order they
  // were scheduled.
  struct Timer {
    Nanos time;
    uint64_t sequence;
    std::function<void()> action;
    bool operator>(const Timer& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  // An issuer ready to take its next page at `time`.
  struct Ready {
    Picos time;
    int device;
    uint32_t issuer;
    bool operator>(const Ready& other) const {
      if (time != other.time) return time > other.time;
      if (device != other.device) return device > other.device;
      return issuer > other.issuer;
    }
  };
  void At(Nanos time, std::function<void()> action) {
    timers_.push(Timer{std::max(time, now_), next_timer_++, std::move(action)});
  }
  // A protocol message from one node to another: one network latency
  // between nodes, nothing within one. Counted until it arrives, since a
  // kernel ends only once the protocol has gone quiet.
  void Message(int from_node, int to_node, std::function<void()> action) {
    ++messages_in_flight_;
    const Nanos delay = from_node == to_node ? 0 : config_.network.latency_ns;
    At(now_ + delay, [this, action = std::move(action)] {
      --messages_in_flight_;
      action();
    });
  }
  // Bulk bytes on a link, then `done`.
  void Transfer(PcieLink& link, LinkDirection direction, uint64_t bytes, TransferKind priority,
                bool evicts_for_room, std::function<void()> done) {
    const TransferId id = next_transfer_++;
    on_transfer_[id] = std::move(done);
    LinkTransfer transfer;
    transfer.id = id;
    transfer.direction = direction;
    transfer.priority = priority;
    transfer.bytes = bytes;
    transfer.ready_ns = now_;
    transfer.evicts_for_room = evicts_for_room;
    link.Submit(transfer, now_);
  }
  // Out of `node`'s network port (its egress direction).
  void SendOverNetwork(int node, uint64_t bytes, TransferKind priority,
                       std::function<void()> done) {
    Transfer(*ports_[node], LinkDirection::kHostToDevice, bytes, priority, false, std::move(done));
  }
  template <typename Done>
  absl::Status RunUntil(const Done& done, const char* phase);
  Nanos NextSystemTime() const;
  void ProcessSystemEventsAt(Nanos time);
  absl::Status CheckStep();

  // --- Kernels ---
  absl::Status Launch(const GridKernel& kernel);
  void StartShare(Device& d, const GridKernel& kernel, const GridShare& share);
  void StepIssuer(const Ready& ready);
  bool NextPage(Device& d, Issuer& issuer);
  void ShareDone(Device& d, Nanos time);
  bool KernelDone() const;
  absl::Status EndKernel();
  absl::Status CopyOut();

  // --- Fault service and the protocol ---
  void ScheduleService(Device& d, Nanos time);
  void ServiceBatch(Device& d);
  void FinishBatch(uint64_t batch);
  Job& NewJob(JobKind kind, Device& d, BlockNumber block);
  void EnqueueJob(Job& job);
  void StartJob(uint64_t id);
  // Claims a frame for `job`'s block, evicting if none is free. False when
  // the job must wait (an eviction for it is under way, or no block can go).
  bool ObtainFrame(Device& d, Job& job);
  void ContinueJob(Job& job);
  void RequestLock(Job& job);
  void OnLocked(uint64_t id);
  void Execute(uint64_t id);
  void FetchPages(uint64_t id, const snurhac::Fetch& fetch);
  void PieceDone(uint64_t id);
  void Land(Job& job);
  void ExecuteEviction(Job& job);
  void FinishEviction(Job& job);
  void Unlock(Job& job);
  void FinishJob(uint64_t id);
  void ApplyDowngrade(const Downgrade& downgrade);
  void UnmapAt(int device, BlockNumber block, const PageMask& pages);
  // Gives back the frame of a block that holds no pages and has no job.
  void ReleaseIdleFrame(Device& d, BlockNumber block);
  void RetryFrameWaiters(Device& d);
  void PumpPrefetches(Device& d);
  bool ReadOnly(BlockNumber block) const {
    const BlockDescriptor* descriptor = directory_.Find(block);
    return descriptor != nullptr && descriptor->read_only;
  }
  // The pages of `block` inside the program's arrays.
  PageMask ArrayPages(BlockNumber block) const;
  int OwnerNode(BlockNumber block) const {
    return config_.NodeOf(directory_.DescriptorOwner(block));
  }
  int NodeOfHolder(int holder) const { return holder == kHost ? 0 : config_.NodeOf(holder); }
  bool Busy(BlockNumber block) const;

  const GridProgram& program_;
  ClusterConfig config_;
  CoherenceDirectory directory_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<PcieLink>> ports_;  // per node
  std::unique_ptr<CoherenceAudit> audit_;

  Nanos now_ = 0;
  uint32_t exec_id_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  uint64_t next_timer_ = 0;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready_;
  absl::flat_hash_map<TransferId, std::function<void()>> on_transfer_;
  TransferId next_transfer_ = 1;
  std::vector<TransferId> completed_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Job>> jobs_;
  uint64_t next_job_ = 1;
  absl::flat_hash_map<uint64_t, Batch> batches_;
  uint64_t next_batch_ = 1;
  // Jobs queued for a lock: (block, device) -> job.
  absl::flat_hash_map<std::pair<BlockNumber, int>, uint64_t> lock_waiters_;
  // Pages the host's UM space holds data for: the arrays copied in, and
  // what was written back since. The rest have never held any.
  absl::flat_hash_map<BlockNumber, PageMask> host_data_;
  int messages_in_flight_ = 0;
  absl::Status error_;
  ClusterResult result_;
};

}  // namespace umlab::snurhac::internal

#endif  // UMLAB_EMU_SNURHAC_CLUSTER_RUN_H_
