#include "backends/cuda/transfer_issuer.h"

#include "absl/strings/str_format.h"

namespace umlab::cuda {

TransferIssuer::TransferIssuer(int gpu, cudaStream_t stream, CallLog log)
    : gpu_(gpu), stream_(stream), log_(log), worker_([this] { Work(); }) {}

TransferIssuer::~TransferIssuer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
  cudaStreamSynchronize(stream_);
  for (const Issued& issued : issued_) cudaEventDestroy(issued.done);
  for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
}

void TransferIssuer::Submit(Command command) {
  if (log_.file != nullptr) command.submitted = log_.clock();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void TransferIssuer::Work() {
  cudaSetDevice(gpu_);  // the current device is per thread
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to issue
    Command command = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Issue(command);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

template <typename Check>
void TransferIssuer::IssueRemoteMapping(const Command& command, Check& check) {
  const cudaMemLocation host{cudaMemLocationTypeHost, 0};
  const cudaMemLocation gpu{cudaMemLocationTypeDevice, gpu_};
  for (const Span& span : command.remote) {
    void* pointer = reinterpret_cast<void*>(span.address);
    if (command.unmap) {
      check(cudaMemAdvise(pointer, span.bytes, cudaMemAdviseUnsetAccessedBy, gpu),
            "cudaMemAdvise(UnsetAccessedBy)");
      check(cudaMemAdvise(pointer, span.bytes, cudaMemAdviseUnsetPreferredLocation, host),
            "cudaMemAdvise(UnsetPreferredLocation)");
      continue;
    }
    check(cudaMemAdvise(pointer, span.bytes, cudaMemAdviseSetPreferredLocation, host),
          "cudaMemAdvise(SetPreferredLocation)");
    // The data must be in host memory for the mapping to reach it there.
    check(cudaMemPrefetchAsync(pointer, span.bytes, host, 0, stream_), "cudaMemPrefetchAsync");
    check(cudaMemAdvise(pointer, span.bytes, cudaMemAdviseSetAccessedBy, gpu),
          "cudaMemAdvise(SetAccessedBy)");
  }
}

void TransferIssuer::Issue(const Command& command) {
  const uint64_t begin = log_.file != nullptr ? log_.clock() : 0;
  absl::Status failure;
  auto check = [&](cudaError_t error, const char* what) {
    if (error != cudaSuccess && failure.ok()) {
      failure = absl::InternalError(
          absl::StrFormat("%s failed: %s", what, cudaGetErrorString(error)));
    }
  };
  if (!command.remote.empty()) IssueRemoteMapping(command, check);
  if (!command.discard.empty()) {
    std::vector<void*> pointers;
    std::vector<size_t> sizes;
    for (const Span& span : command.discard) {
      pointers.push_back(reinterpret_cast<void*>(span.address));
      sizes.push_back(span.bytes);
    }
    check(cudaMemDiscardBatchAsync(pointers.data(), sizes.data(), pointers.size(), 0, stream_),
          "cudaMemDiscardBatchAsync");
  }
  cudaMemLocation location{};
  location.type = command.to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  location.id = command.to_device ? gpu_ : 0;
  for (const Span& span : command.prefetch) {
    check(cudaMemPrefetchAsync(reinterpret_cast<void*>(span.address), span.bytes, location, 0,
                               stream_),
          "cudaMemPrefetchAsync");
  }
  cudaEvent_t done = nullptr;
  if (command.id != 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_events_.empty()) {
      done = spare_events_.back();
      spare_events_.pop_back();
    }
  }
  if (command.id != 0 && done == nullptr) {
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  }
  if (done != nullptr) check(cudaEventRecord(done, stream_), "cudaEventRecord");
  if (log_.file != nullptr) LogCall(command, begin, log_.clock());
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure.ok() && status_.ok()) status_ = failure;
  if (done != nullptr) issued_.push_back(Issued{command.id, done});
}

void TransferIssuer::LogCall(const Command& command, uint64_t begin, uint64_t end) const {
  auto total = [](const std::vector<Span>& spans) {
    uint64_t bytes = 0;
    for (const Span& span : spans) bytes += span.bytes;
    return bytes;
  };
  const char* kind = !command.remote.empty() ? (command.unmap ? "remote_unmap" : "remote_map")
                     : command.to_device     ? "prefetch"
                     : !command.prefetch.empty() || command.id != 0 ? "evict"
                                                                    : "discard";
  const std::vector<Span>& named = !command.prefetch.empty() ? command.prefetch
                                   : !command.discard.empty() ? command.discard
                                                              : command.remote;
  const auto since = [this](uint64_t t) { return static_cast<long long>(t - log_.origin); };
  std::fprintf(log_.file, "%llu,%s,0x%llx,%zu,%llu,%zu,%llu,%lld,%lld,%lld\n",
               static_cast<unsigned long long>(command.id), kind,
               static_cast<unsigned long long>(named.empty() ? 0 : named.front().address),
               command.discard.size(), static_cast<unsigned long long>(total(command.discard)),
               command.prefetch.size(), static_cast<unsigned long long>(total(command.prefetch)),
               since(command.submitted), since(begin), since(end));
}

void TransferIssuer::CollectFinished(std::vector<TransferId>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!issued_.empty() && cudaEventQuery(issued_.front().done) == cudaSuccess) {
    out.push_back(issued_.front().id);
    spare_events_.push_back(issued_.front().done);
    issued_.pop_front();
  }
}

void TransferIssuer::Drain() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
  }
  cudaStreamSynchronize(stream_);
}

absl::Status TransferIssuer::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

}  // namespace umlab::cuda
