// The engine's side of the UVM driver on a real GPU: its prefetch, eviction
// and discard calls, issued in order on a stream of their own
// (TransferIssuer), and their completions handed back to the engine, with
// the faults that wait meanwhile. Shared by the cuda backend and the live
// PyTorch backend.
//
// A fault migration is the driver's own work, done by the time the engine
// hears of it: it completes at once. A policy prefetch that finishes tells
// the record reader the block was refilled, so that older eviction records
// of it are not applied.
#ifndef UMLAB_BACKENDS_CUDA_DRIVER_CALLS_H_
#define UMLAB_BACKENDS_CUDA_DRIVER_CALLS_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "backends/cuda/driver_record_reader.h"
#include "backends/cuda/transfer_issuer.h"
#include "core/backend.h"
#include "core/transfer.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

class DriverCalls {
 public:
  using Span = TransferIssuer::Span;

  // Calls go out on `stream` of `gpu` from now on, each logged to `log`
  // if it has a file.
  void Start(int gpu, cudaStream_t stream, TransferIssuer::CallLog log = {});
  // Issues what is queued, waits for it, and stops the issuing thread.
  void Stop();
  bool started() const { return issuer_ != nullptr; }

  // The engine's migration of `transfer`, whose pages are `spans`.
  void Migrate(const Transfer& transfer, std::vector<Span> spans);
  // An eviction: `discard` dropped without write-back, `copy` moved to the
  // host.
  void Evict(const Transfer& transfer, std::vector<Span> discard, std::vector<Span> copy);
  // An eviction the driver makes by itself when the CPU touches the pages
  // (a host kernel's, under memory=driver): only the pages the engine drops
  // (`discard`) are dropped now, and the eviction completes at once, as a
  // fault migration does.
  void LeaveToTheCpu(const Transfer& transfer, std::vector<Span> discard);
  // Pages dropped with no transfer to wait for.
  void Discard(std::vector<Span> spans);
  // Remote mapping: the GPU reaches the spans in host memory (Map), or
  // faults on them again (Unmap). In order with the other calls.
  void MapRemote(std::vector<Span> spans);
  void UnmapRemote(std::vector<Span> spans);

  // Hands every finished transfer to `listener` and lets `engine` service
  // the faults waiting in `faults`, until neither makes progress.
  void DeliverCompletions(TransferListener& listener, Engine& engine, FaultBuffer& faults,
                          DriverRecordReader& reader);
  // Blocks until every call so far has finished on the GPU.
  void Drain();
  // The first failed call's error; OK otherwise.
  absl::Status status() const;

 private:
  std::unique_ptr<TransferIssuer> issuer_;
  std::vector<TransferId> completed_now_;
  std::vector<TransferId> finished_;
  // The policy's prefetches under way, by id: the block each one fills.
  absl::flat_hash_map<TransferId, BlockNumber> prefetching_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_DRIVER_CALLS_H_
