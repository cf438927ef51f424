#include "backends/cuda/driver_calls.h"

#include "core/engine.h"

namespace umlab::cuda {

void DriverCalls::Start(int gpu, cudaStream_t stream, TransferIssuer::CallLog log) {
  issuer_ = std::make_unique<TransferIssuer>(gpu, stream, log);
}

void DriverCalls::Stop() { issuer_.reset(); }

void DriverCalls::Migrate(const Transfer& transfer, std::vector<Span> spans) {
  if (transfer.kind == TransferKind::kFaultMigration) {
    // The driver moved these pages when it serviced the fault; the engine
    // hears of it only now. Completion is handed back after this call.
    completed_now_.push_back(transfer.id);
    return;
  }
  prefetching_.emplace(transfer.id, transfer.block);
  issuer_->Submit({transfer.id, {}, std::move(spans), true});
}

void DriverCalls::Evict(const Transfer& transfer, std::vector<Span> discard,
                        std::vector<Span> copy) {
  issuer_->Submit({transfer.id, std::move(discard), std::move(copy), false});
}

void DriverCalls::LeaveToTheCpu(const Transfer& transfer, std::vector<Span> discard) {
  if (!discard.empty()) Discard(std::move(discard));
  completed_now_.push_back(transfer.id);
}

void DriverCalls::Discard(std::vector<Span> spans) {
  issuer_->Submit({0, std::move(spans), {}, false});
}

void DriverCalls::MapRemote(std::vector<Span> spans) {
  TransferIssuer::Command command;
  command.remote = std::move(spans);
  issuer_->Submit(std::move(command));
}

void DriverCalls::UnmapRemote(std::vector<Span> spans) {
  TransferIssuer::Command command;
  command.remote = std::move(spans);
  command.unmap = true;
  issuer_->Submit(std::move(command));
}

void DriverCalls::DeliverCompletions(TransferListener& listener, Engine& engine,
                                     FaultBuffer& faults, DriverRecordReader& reader) {
  bool progress = true;
  while (progress) {
    progress = false;
    while (!completed_now_.empty()) {
      std::vector<TransferId> done;
      done.swap(completed_now_);
      for (TransferId id : done) listener.OnTransferComplete(id);
      progress = true;
    }
    finished_.clear();
    issuer_->CollectFinished(finished_);
    if (!finished_.empty()) {
      // An upper bound on when each finished: now, on CUPTI's clock. A
      // driver eviction that began between the prefetch's true end and now
      // is taken for a stale one; the window is one poll wide.
      const uint64_t now = CuptiFaultStream::Timestamp();
      for (TransferId id : finished_) {
        auto prefetch = prefetching_.find(id);
        if (prefetch == prefetching_.end()) continue;
        reader.NoteRefill(prefetch->second, now);
        prefetching_.erase(prefetch);
      }
    }
    for (TransferId id : finished_) listener.OnTransferComplete(id);
    progress = progress || !finished_.empty();
    if (!faults.empty() && !engine.servicing()) {
      engine.ServiceFaults();
      progress = progress || !completed_now_.empty();
    }
  }
}

void DriverCalls::Drain() {
  if (issuer_ != nullptr) issuer_->Drain();
}

absl::Status DriverCalls::status() const {
  return issuer_ == nullptr ? absl::OkStatus() : issuer_->status();
}

}  // namespace umlab::cuda
