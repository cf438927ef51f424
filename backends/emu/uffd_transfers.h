// Carries out the engine's migrations and evictions on the uffd device,
// asynchronously and in real time.
//
// One worker per link lane, as the link carries one transfer at a time each
// way, and storage (with a storage tier) one more each way beside it. A worker takes the best ready transfer of its direction (fault
// migrations before evictions before prefetches, first come first served
// within a kind, as on PcieLink), books the link on the PcieThrottle, moves
// the bytes while the booked time runs, waits for the booking to end, then
// finishes the transfer (a migration maps its pages only then, so the data
// appears when the modelled transfer lands) and reports it.
//
// A transfer is ready once its ready time has passed and the transfer it
// depends on (`after`) has finished.
#ifndef UMLAB_BACKENDS_EMU_UFFD_TRANSFERS_H_
#define UMLAB_BACKENDS_EMU_UFFD_TRANSFERS_H_

#include <array>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "core/transfer.h"
#include "backends/emu/pcie_throttle.h"

namespace umlab {

class UffdTransfers {
 public:
  // What a transfer does to the device; called on a worker thread.
  class Hooks {
   public:
    virtual ~Hooks() = default;
    // Moves the bytes (while the link time runs).
    virtual void Copy(const Transfer& transfer) = 0;
    // Once the link time is over: map a migration's pages.
    virtual void Land(const Transfer& transfer) = 0;
    // The transfer is over; tell the engine. `landed_at` (MonotonicNanos)
    // is when its modelled link time ended, which the worker's own delays
    // may have passed.
    virtual void Completed(TransferId id, Nanos landed_at) = 0;
  };

  UffdTransfers(PcieThrottle& throttle, Hooks& hooks);
  ~UffdTransfers();  // Stop()s

  // `ready_at` is a MonotonicNanos() time. The bytes that cross the link
  // are transfer.copy. With the throttle off, the transfer is carried out
  // before Submit returns (Completed included).
  void Submit(const Transfer& transfer, Nanos ready_at);
  // Stops and joins the workers; transfers not started are abandoned.
  void Stop();

  // Submitted and not yet completed.
  size_t unfinished() const;

 private:
  struct Pending {
    Transfer transfer;
    Nanos ready_at;
    uint64_t sequence;
  };
  // Lanes: host-to-device, device-to-host, then the same for storage.
  static int LaneOf(const Transfer& transfer);
  void WorkerLoop(int lane);
  // The best ready transfer for `lane`, removed from the queue; or the
  // time the next one may become ready (kNever: none known) in `wake_at`.
  bool TakeReady(int lane, Nanos now, Pending& out, Nanos& wake_at)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PcieThrottle& throttle_;
  Hooks& hooks_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<std::vector<Pending>, 4> queues_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<TransferId> unfinished_ ABSL_GUARDED_BY(mu_);
  std::array<std::thread, 4> workers_;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_TRANSFERS_H_
