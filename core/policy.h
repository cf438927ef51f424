// The Policy interface: the decisions of unified-memory management.
//
// In the spirit of ChampSim's drop-in modules, a policy sees a handful of
// hooks and answers a handful of questions. The engine owns every mechanism
// (batching, frames, transfers, replay); a policy owns only decisions:
//   - which extra pages to bring with a fault (ExpandFault),
//   - which block to evict when a frame is needed (ChooseVictim),
//   - which pages of a victim to drop instead of writing back (PagesToDrop),
//   - where a victim's pages go, host memory or storage (EvictTo),
//   - what to prefetch, pre-evict and discard ahead of need (through
//     PolicyContext).
// A policy may also plan over the whole program before it runs (PlansAhead,
// Plan: G10's planner), then act on its plan at kernel boundaries.
// Policies depend on core only, never on a backend.
#ifndef UMLAB_CORE_POLICY_H_
#define UMLAB_CORE_POLICY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/copy_command.h"
#include "core/device_config.h"
#include "core/event.h"
#include "core/event_source.h"
#include "core/fault.h"
#include "core/memory_state.h"
#include "core/memory_tier.h"
#include "core/policy_stats.h"
#include "core/program_graph.h"
#include "core/registry.h"

namespace umlab {

// One block of a preprocessed fault batch: the distinct pages that faulted.
struct FaultedBlock {
  BlockNumber block = 0;
  PageMask pages;        // distinct faulted pages
  PageMask write_pages;  // of those, the ones written
};

// A fault batch after deduplication and grouping, blocks in address order.
struct FaultBatch {
  Nanos time_ns = 0;
  absl::Span<const FaultEntry> raw;  // as fetched, duplicates included
  absl::Span<const FaultedBlock> blocks;
};

enum class VictimReason : uint8_t { kFault, kPrefetch, kPreEvict };

struct VictimQuery {
  VictimReason reason = VictimReason::kFault;
  BlockNumber for_block = 0;  // the block that needs the frame
};

// What the engine offers a policy: a view of memory and the requests a
// policy may queue. Requests are carried out by the engine, faults first.
class PolicyContext {
 public:
  virtual ~PolicyContext() = default;
  virtual const MemoryView& memory() const = 0;
  virtual Nanos now() const = 0;
  // The execution id of the kernel running now (0 between kernels).
  virtual uint32_t current_exec_id() const = 0;

  // Queue pages of a block for migration ahead of need, for the kernel
  // `exec_id`. Resident and in-flight pages are skipped when it is issued.
  virtual void Prefetch(BlockNumber block, const PageMask& pages, uint32_t exec_id) = 0;
  // Make `pages` of a block resident ahead of first touch where they hold no
  // data yet (G10's pre-allocation): they are populated in place, no bytes
  // move, and, since they do not occupy the link, they neither wait behind
  // queued prefetches nor count toward the prefetches in flight. Pages with
  // data are left alone (Prefetch brings those).
  virtual void Populate(BlockNumber block, const PageMask& pages) = 0;
  // Drop every prefetch queued and not yet issued.
  virtual void CancelPrefetches() = 0;
  virtual size_t queued_prefetches() const = 0;
  // Evict a block ahead of need, so a later migration finds a free frame.
  virtual void PreEvict(BlockNumber block) = 0;
  // Evict some pages of a block ahead of need (a tensor's, say), to `tier`
  // on a device with storage; past the host's line they go to storage
  // whatever the tier. Pages not resident are skipped. The block keeps its
  // frame while any page stays. Like PreEvict, nothing happens to a block
  // that is pinned or has a transfer in flight when the request is issued.
  virtual void PreEvictPages(BlockNumber block, const PageMask& pages, MemoryTier tier) = 0;
  // Drop the data of those `pages` the allocator holds free (G10's
  // pre-deallocation of a dead tensor): resident ones leave the device
  // without a write-back, copies on the host or in storage are forgotten,
  // and an emptied block gives its frame back. Active pages are left alone,
  // so a wrong plan costs time, never data.
  virtual void Discard(BlockNumber block, const PageMask& pages) = 0;
  // Forbid or allow evicting a block (thrashing mitigation).
  virtual void SetPinned(BlockNumber block, bool pinned) = 0;

  // Map `pages` of a block for the device to use where their data is, in
  // host memory, without migrating it (MemFerry's direct host access): they
  // take no frame and never fault, and every access the program makes to
  // them crosses the link, reads and writes at the device's remote
  // bandwidths. Pages on the device, on their way, in storage or mapped
  // already are skipped; a page with no data yet gets a zeroed host page.
  // A later migration of a mapped page (a Prefetch, a fault after
  // UnmapRemote) takes the mapping down first, so "map now, migrate later"
  // is a MapRemote followed by a Prefetch. Only for a policy whose
  // MapsRemotely() is true.
  virtual void MapRemote(BlockNumber block, const PageMask& pages) = 0;
  // Take remote mappings down: the next access to those pages faults.
  virtual void UnmapRemote(BlockNumber block, const PageMask& pages) = 0;
};

// A kernel ready to launch while the hidden copy issued just before it on
// the stream is still under way (Policy::LaunchesEarly). The backend asks
// only once that copy (and every hidden copy before it) has started and its
// destination has left the device since: then none of its pages can be
// read before it lands, whatever the answer.
struct EarlyLaunchQuery {
  uint32_t exec_id = 0;
  CopyId copy = 0;
  // The kernel's accesses overlap the copy's destination.
  bool kernel_touches_copy = false;
};

// What a planning policy is given before the run (Policy::Plan).
struct PlanInput {
  const ProgramGraph& program;
  const DeviceConfig& device;
  uint64_t capacity_bytes = 0;  // the device memory the run may use
};

class Policy {
 public:
  virtual ~Policy() = default;

  // Called once by the engine before the run.
  void Bind(PolicyContext* context) { context_ = context; }

  // --- Planning ---
  // True for a policy that plans over the whole program before it runs: the
  // runner then reads the program ahead and calls Plan() once, before the
  // first event. A run that cannot show the program ahead (a live PyTorch
  // session) refuses such a policy.
  virtual bool PlansAhead() const { return false; }
  virtual absl::Status Plan(const PlanInput& /*input*/) { return absl::OkStatus(); }

  // --- Hooks ---
  // The program's iteration marker (its index), before that iteration's
  // first event.
  virtual void OnIterationBegin(uint64_t /*iteration*/) {}
  virtual void OnFaultBatch(const FaultBatch& /*batch*/) {}
  virtual void OnKernelBegin(uint32_t /*exec_id*/) {}
  virtual void OnKernelEnd(uint32_t /*exec_id*/) {}
  virtual void OnMigrated(BlockNumber /*block*/, const PageMask& /*pages*/,
                          TransferKind /*kind*/) {}
  virtual void OnEvicted(BlockNumber /*block*/, const PageMask& /*pages*/) {}
  // kAlloc, kFree, kActivate, kDeactivate as the allocator reports them.
  virtual void OnAllocatorEvent(const Event& /*event*/) {}
  virtual void OnFreeSpaceChanged(uint64_t /*free_frames*/) {}
  // The block's end of life: an allocator free returned all of its 2 MB to
  // the device, so whatever the policy remembers about it describes data
  // that no longer exists. Per-block history (thrashing counts, pins) should
  // be dropped here, as the UVM driver's heuristics drop theirs on its
  // block-destroyed event. Learned program behaviour keyed by address (a
  // correlation table) may stay: the allocator reuses addresses.
  virtual void OnBlockFreed(BlockNumber /*block*/) {}

  // --- Decisions ---
  // The pages to migrate for a fault on `faulted` pages of `block`; the
  // engine ignores pages outside the block and pages already resident.
  // Extra pages count as prefetch traffic. Default: exactly the faulted pages.
  virtual PageMask ExpandFault(BlockNumber /*block*/, const PageMask& faulted) {
    return faulted;
  }
  // The block to evict so that `query.for_block` gets a frame, or nullopt to
  // refuse (the engine then leaves the fault for a later batch or drops the
  // prefetch). Must be Evictable(). Default: least recently migrated.
  virtual std::optional<BlockNumber> ChooseVictim(const VictimQuery& query);
  // Pages of a victim to drop instead of writing back. Default: none.
  virtual PageMask PagesToDrop(const BlockState& /*victim*/) { return PageMask(); }
  // Where a victim's written-back pages go, on a device with storage behind
  // it. The host takes them only below its line (MemoryView::HostFull);
  // past it the engine sends them to storage whatever the answer. Default:
  // the host, so evictions spill to storage once the host is full, as G10's
  // base UVM does.
  virtual MemoryTier EvictTo(const BlockState& /*victim*/) { return MemoryTier::kHost; }
  // Of the `faulted` pages of `block` (not on the device or on their way),
  // those to map remotely (PolicyContext::MapRemote) rather than migrate:
  // the fault is answered with a mapping to the host's copy. Only asked of
  // a policy whose MapsRemotely() is true. Default: none.
  virtual PageMask MapRemotelyOnFault(BlockNumber /*block*/, const PageMask& /*faulted*/) {
    return PageMask();
  }
  // True for a policy that maps pages remotely: a run refuses it on a
  // backend that cannot (Backend::MapsRemotely).
  virtual bool MapsRemotely() const { return false; }
  // --- Copies (a program's cudaMemcpy: core/copy_command.h, docs/hum.md) ---
  // How the run carries `copy` out. Default: as unified memory runs a
  // program written with copies (CopyMode::kHostAccess), which is what a
  // policy of managed memory makes of it.
  virtual CopyMode HowToCopy(const CopyCommand& /*copy*/) { return CopyMode::kHostAccess; }
  // Hidden copies: the host threads that stage chunks in host memory.
  virtual int CopyThreads() const { return 1; }
  // Hidden copies: whether `copy` may start now while the copies before it
  // in `earlier` (ascending) are not done. Default: yes. Whatever the
  // answer, a copy whose destination overlaps one of those waits for it.
  virtual bool StartsCopy(CopyId /*copy*/, absl::Span<const CopyId> /*earlier*/) {
    return true;
  }
  // Hidden copies: of the copies whose staged chunks wait for the one
  // migration thread (ascending, never empty), the one whose next chunk it
  // moves now. Default: the oldest.
  virtual CopyId NextCopyToMigrate(absl::Span<const CopyId> waiting) { return waiting.front(); }
  // Whether a kernel may launch before the hidden copy just before it on
  // the stream is done. Default: no, as stream order has it.
  virtual bool LaunchesEarly(const EarlyLaunchQuery& /*query*/) { return false; }

  // True for the `ideal` bound: the engine then never runs out of frames.
  virtual bool UnlimitedCapacity() const { return false; }

  // Bytes of the policy's own tables (DeepUM's correlation tables, say).
  virtual uint64_t TableBytes() const { return 0; }

  // Called once after the run: the policy's own counters, by name, in an
  // order that does not change (ChampSim's *_final_stats). They are printed
  // per run in the table and in the JSON's `policy_stats`. Default: none.
  virtual void ReportStats(PolicyStats& /*out*/) const {}

 protected:
  PolicyContext& context() const { return *context_; }

 private:
  PolicyContext* context_ = nullptr;
};

using PolicyRegistry = Registry<Policy>;

// The process-wide registry every policy adds itself to.
PolicyRegistry& Policies();

// A policy's refusal, from Plan, to run this program at this capacity (one
// line saying why: FlashNeuron keeps every weight on the device). A
// comparison of the default policies leaves such a policy out and says so;
// one that names the policy fails with it.
absl::Status PolicyRefusal(absl::string_view message);
bool IsPolicyRefusal(const absl::Status& status);

// Reads `program` ahead and lets `policy` plan over it, for a policy that
// PlansAhead(); nothing for the others. `program` is read to its end, so
// the run needs a fresh source.
absl::Status PlanAhead(Policy& policy, EventSource& program, const DeviceConfig& device,
                       uint64_t capacity_bytes);

}  // namespace umlab

// Registers a policy from its source file's static initialisation:
//   UMLAB_REGISTER_POLICY(demand, {"demand", "description", {params}, factory});
#define UMLAB_REGISTER_POLICY(id, ...)                               \
  [[maybe_unused]] static const bool umlab_policy_registered_##id = \
      ::umlab::Policies().Register(__VA_ARGS__)

#endif  // UMLAB_CORE_POLICY_H_
