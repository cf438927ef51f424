#include "backends/emu/uffd_transfers.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>

#include "absl/time/time.h"

namespace umlab {

UffdTransfers::UffdTransfers(PcieThrottle& throttle, Hooks& hooks)
    : throttle_(throttle), hooks_(hooks) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  for (int lane = 0; lane < static_cast<int>(workers_.size()); ++lane) {
    workers_[lane] = std::thread([this, lane] { WorkerLoop(lane); });
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

UffdTransfers::~UffdTransfers() { Stop(); }

void UffdTransfers::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

size_t UffdTransfers::unfinished() const {
  absl::MutexLock lock(&mu_);
  return unfinished_.size();
}

void UffdTransfers::Submit(const Transfer& transfer, Nanos ready_at) {
  if (!throttle_.enabled()) {
    // No link to model: move the data now, on the caller's thread. Earlier
    // transfers are done already, so `after` holds; two thread hand-offs
    // per fault batch are saved.
    hooks_.Copy(transfer);
    hooks_.Land(transfer);
    hooks_.Completed(transfer.id, MonotonicNanos());
    return;
  }
  absl::MutexLock lock(&mu_);
  unfinished_.insert(transfer.id);
  queues_[LaneOf(transfer)].push_back(Pending{transfer, ready_at, sequence_++});
  changed_.SignalAll();
}

int UffdTransfers::LaneOf(const Transfer& transfer) {
  const int direction = static_cast<int>(transfer.kind == TransferKind::kEviction
                                             ? LinkDirection::kDeviceToHost
                                             : LinkDirection::kHostToDevice);
  return direction + (transfer.storage.any() ? 2 : 0);
}

bool UffdTransfers::TakeReady(int lane, Nanos now, Pending& out, Nanos& wake_at) {
  std::vector<Pending>& queue = queues_[lane];
  wake_at = kNever;
  int best = -1;
  for (int i = 0; i < static_cast<int>(queue.size()); ++i) {
    const Pending& p = queue[i];
    if (p.transfer.after != 0 && unfinished_.contains(p.transfer.after)) continue;
    if (p.ready_at > now) {
      wake_at = std::min(wake_at, p.ready_at);
      continue;
    }
    if (best < 0 || std::pair(p.transfer.kind, p.sequence) <
                        std::pair(queue[best].transfer.kind, queue[best].sequence)) {
      best = i;
    }
  }
  if (best < 0) return false;
  out = queue[best];
  queue.erase(queue.begin() + best);
  return true;
}

void UffdTransfers::WorkerLoop(int lane) {
  const LinkDirection direction = static_cast<LinkDirection>(lane % 2);
  for (;;) {
    Pending next;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stop_) return;
        Nanos wake_at = kNever;
        if (TakeReady(lane, MonotonicNanos(), next, wake_at)) break;
        if (wake_at == kNever) {
          changed_.Wait(&mu_);
        } else {
          changed_.WaitWithTimeout(&mu_,
                                   absl::Nanoseconds(std::max<Nanos>(0, wake_at - MonotonicNanos())));
        }
      }
    }
    // Booked from when it was ready, not from when this worker got to it:
    // the worker's own delays (mapping the previous transfer, waking late)
    // must not stretch the modelled link.
    const Nanos end = throttle_.Reserve(
        direction, next.transfer.copy_bytes(), std::min(next.ready_at, MonotonicNanos()),
        /*via_storage=*/lane >= 2,
        /*fault_path=*/next.transfer.kind == TransferKind::kFaultMigration);
    hooks_.Copy(next.transfer);
    SleepUntilNanos(end);
    hooks_.Land(next.transfer);
    {
      absl::MutexLock lock(&mu_);
      unfinished_.erase(next.transfer.id);
      // Its dependents became ready only now.
      const Nanos now = MonotonicNanos();
      for (std::vector<Pending>& queue : queues_) {
        for (Pending& p : queue) {
          if (p.transfer.after == next.transfer.id) p.ready_at = std::max(p.ready_at, now);
        }
      }
      changed_.SignalAll();
    }
    hooks_.Completed(next.transfer.id, end);
  }
}

}  // namespace umlab
