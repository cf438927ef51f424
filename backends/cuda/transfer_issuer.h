// Issues the engine's data movement to the UVM driver from a thread of its
// own, in submission order, on one stream.
//
// cudaMemPrefetchAsync is asynchronous only in name: the driver can hold
// the calling thread for much of the migration (measured: the engine thread
// of an earlier design stopped hearing of kernels for tens of
// milliseconds). The engine thread only queues commands here and collects
// the finished ones, so it keeps up with the GPU's kernel stamps.
#ifndef UMLAB_BACKENDS_CUDA_TRANSFER_ISSUER_H_
#define UMLAB_BACKENDS_CUDA_TRANSFER_ISSUER_H_

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/transfer.h"

namespace umlab::cuda {

class TransferIssuer {
 public:
  // A range of managed memory, by its device pointer.
  struct Span {
    uint64_t address;
    uint64_t bytes;
  };
  struct Command {
    TransferId id = 0;         // 0: nobody waits for it (a plain discard)
    std::vector<Span> discard;   // dropped without write-back, first
    std::vector<Span> prefetch;  // then moved to `to_device` or to the host
    bool to_device = true;
    // Remote mapping (PolicyContext::MapRemote), in place of the above:
    // the spans' preferred location becomes the host and the GPU maps them
    // where they are (AccessedBy), after a prefetch to the host; or, with
    // `unmap`, both advices are taken back, so the next GPU access faults
    // and migrates.
    std::vector<Span> remote;
    bool unmap = false;
    uint64_t submitted = 0;  // on the call log's clock, when it has one
  };
  // One row per command, written by the issuing thread (cuda:calls=FILE):
  // when the engine submitted it and when the thread began and ended its
  // calls, in ns on `clock` since `origin`. The cuda backend passes CUPTI's
  // clock and the run's start on it, so rows line up with the record log's.
  struct CallLog {
    std::FILE* file = nullptr;  // not owned; none: no log
    uint64_t (*clock)() = nullptr;
    uint64_t origin = 0;
  };
  static constexpr const char* kCallLogHeader =
      "id,kind,address,discard_spans,discard_bytes,prefetch_spans,prefetch_bytes,"
      "submitted_ns,begin_ns,end_ns\n";

  TransferIssuer(int gpu, cudaStream_t stream, CallLog log);
  // Issues what is queued, waits for it on the GPU, and joins the thread.
  ~TransferIssuer();
  TransferIssuer(const TransferIssuer&) = delete;
  TransferIssuer& operator=(const TransferIssuer&) = delete;

  void Submit(Command command);
  // Appends the ids of transfers whose calls have all finished on the GPU,
  // in submission order.
  void CollectFinished(std::vector<TransferId>& out);
  // Blocks until everything submitted so far has been issued and finished.
  void Drain();
  // The first failed call's error; OK otherwise.
  absl::Status status() const;

 private:
  struct Issued {
    TransferId id;
    cudaEvent_t done;
  };
  void Work();
  void Issue(const Command& command);
  void LogCall(const Command& command, uint64_t begin, uint64_t end) const;
  // A command's remote mapping or unmapping; `check` keeps the first error.
  template <typename Check>
  void IssueRemoteMapping(const Command& command, Check& check);

  const int gpu_;
  const cudaStream_t stream_;
  const CallLog log_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Command> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::deque<Issued> issued_;
  std::vector<cudaEvent_t> spare_events_;
  absl::Status status_;
  std::thread worker_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_TRANSFER_ISSUER_H_
