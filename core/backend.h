// The Backend interface: what the fault-service engine needs from a device.
//
// Three implementations exist: sim (virtual time), uffd (real page faults,
// no GPU) and cuda (the real UVM driver). The engine owns the decisions of
// the fault-service pipeline; a backend only carries them out and reports
// back through TransferListener.
#ifndef UMLAB_CORE_BACKEND_H_
#define UMLAB_CORE_BACKEND_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/event_sink.h"
#include "core/event_source.h"
#include "core/fault.h"
#include "core/transfer.h"

namespace umlab {

// Told when a transfer has finished (data in place, or written back).
class TransferListener {
 public:
  virtual ~TransferListener() = default;
  virtual void OnTransferComplete(TransferId id) = 0;
};

// What the device knows about a block's pages that the engine cannot see:
// which were touched and which were written since they were mapped.
struct PageUse {
  PageMask accessed;
  PageMask dirty;
};

// How stalled accessors are woken after fault service (UVM's replay policy).
enum class ReplayPolicy : uint8_t {
  kBlock,  // as each block's migration lands, wake accessors of that block
  kBatch,  // once the whole batch is serviced; pending duplicates are flushed
  kOnce,   // only when the fault buffer has been drained
};

class Engine;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;

  // Executes `program` to its end, feeding its program events to `engine`
  // in order and letting the engine service the faults it raises. Program
  // and observed events go to `recorder` if it is not null. Fills the
  // engine's time statistics (time_ns, stall_ns, dropped_faults).
  virtual absl::Status Run(EventSource& program, Engine& engine, EventSink* recorder) = 0;

  // After a run: does the device agree with the engine about what is
  // resident? Backends that cannot tell return OK.
  virtual absl::Status CheckConsistency(const Engine& /*engine*/) const {
    return absl::OkStatus();
  }

  // Whether the device makes room by itself for a block that arrives by a
  // migration of this kind (kFaultMigration or kPrefetch), as the UVM driver
  // does under real oversubscription: it has evicted a victim of its own
  // choosing by the time the block arrives. The engine then records the
  // block as resident without choosing a victim (it would evict a second
  // block for one arrival) and releases the device's victim when the backend
  // reports it (Engine::OnDeviceEvicted). Until then residency may run past
  // the capacity by the reports still on their way. Pre-evictions stay the
  // policy's.
  virtual bool MakesRoomFor(TransferKind /*arrival*/) const { return false; }
  bool MakesRoomForAnything() const {
    return MakesRoomFor(TransferKind::kFaultMigration) || MakesRoomFor(TransferKind::kPrefetch);
  }

  // Whether the run's h2d and d2h bytes and faults are the device's own
  // count (CUPTI's on the GPU, the sim's driver model in policy_from=user)
  // rather than the engine's requests, which then stay in
  // fault_migrated_bytes and prefetch_bytes and need not add up to h2d.
  virtual bool CountsItsOwnTraffic() const { return false; }

  // Whether fault handling is charged per kernel from measured times (the
  // sim's G10 fault model) rather than per fault batch: the engine then
  // pays no batch latency (the Engine sets EngineConfig::fault_latency_ns
  // to zero).
  virtual bool ChargesFaultsPerKernel() const { return false; }

  // The engine registers itself before the run starts.
  virtual void SetListener(TransferListener* listener) = 0;

  // --- Fault stream ---
  // Moves up to out.size() raw entries (duplicates included) out of the
  // fault buffer, oldest first. Returns how many.
  virtual size_t FetchFaults(absl::Span<FaultEntry> out) = 0;

  // --- Data movement; asynchronous, completion through the listener ---
  // Host->device: populate, copy `copy` and zero-fill the rest of `pages`,
  // then map all of `pages`.
  virtual void Migrate(const Transfer& transfer) = 0;
  // Device->host: unmap `pages` now, write back `copy`, free the data.
  virtual void Evict(const Transfer& transfer) = 0;

  // --- Synchronous page-table operations ---
  // Drop pages without write-back: the next touch sees a fresh page.
  virtual void Invalidate(BlockNumber block, const PageMask& pages) = 0;
  // What was touched and written since the pages were mapped.
  virtual PageUse QueryUse(BlockNumber block) const = 0;

  // --- Remote mapping (direct host access) ---
  // Whether the device can reach host memory without migrating it.
  virtual bool MapsRemotely() const { return false; }
  // Map `pages` of a block, which are not on the device, for the device to
  // read and write where their data is, in host memory: no frame is taken
  // and no fault is raised; each access crosses the link instead. Of them,
  // `fresh` pages have held no data so far (BlockState::invalid before the
  // mapping): they must read as zeroes, whatever bytes their host memory
  // kept from before (a backend with real data zeroes it, as a migration
  // zero-fills such pages). The engine calls this only where MapsRemotely().
  virtual void MapRemote(BlockNumber /*block*/, const PageMask& /*pages*/,
                         const PageMask& /*fresh*/) {}
  // Take such a mapping down: the next access faults. The host keeps the
  // data, writes made through the mapping included. The engine calls this
  // before it migrates a remotely mapped page.
  virtual void UnmapRemote(BlockNumber /*block*/, const PageMask& /*pages*/) {}

  // Wake stalled accessors, no earlier than `not_before`. `block` limits a
  // kBlock replay to one block's accessors; other policies wake everyone.
  virtual void Replay(ReplayPolicy policy, BlockNumber block, Nanos not_before) = 0;

  // The backend's clock: virtual time for sim, modelled time (wall time
  // since the start / dilation) for uffd, wall time since start for cuda.
  virtual Nanos Now() const = 0;

  // When the batch FetchFaults just returned was raised, on Now()'s clock:
  // the fault-handling latency runs from then. Now() by default. A
  // real-time backend whose faults reach the engine some host time after
  // their modelled instant (uffd: thread wake-ups, the gathering of a
  // batch) returns that instant, so the delivery is not added to the
  // modelled latency but hidden in it, as the link's booked time hides the
  // copy's.
  virtual Nanos FetchedBatchInstant() const { return Now(); }
};

}  // namespace umlab

#endif  // UMLAB_CORE_BACKEND_H_
