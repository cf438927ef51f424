// umlab_call_overlap_probe: what a policy's calls and the driver's fault path
// do to each other when both run at once, as DeepUM's pre-evictions and
// prefetches meet the faults they did not prevent. The sim
// (`policy_from=user`) puts the fault path's migrations and the policy's
// calls on one lane, one thing at a time in the order they were asked for,
// so it predicts that a kernel paging in while calls run takes as long as
// the paging and the calls together. On the H200, DeepUM's pre-eviction
// made runs slower, where the sim has it make them faster
// (docs/fidelity.md); this measures the overlap itself.
//
// Room is free throughout (no balloon): nothing here makes the driver evict,
// so only the overlap is measured. The managed region has two parts of
// BLOCKS 2 MiB blocks each: `faulted`, host data that one kernel pages in
// (every page once, one issuer per SM, as umlab_cuda_calibrate's
// demand_paging), and `called`, the blocks the calls move, one call per
// block on a stream of their own, queued back to back or, with PACE_US,
// the n-th no sooner than n * PACE_US after the first:
//   "evict": resident blocks prefetched to the host (a pre-eviction);
//   "evict_absent": the same call for blocks already on the host (a
//     pre-eviction the driver's own eviction overtook: it moves nothing);
//   "prefetch": host blocks prefetched to the GPU;
//   "discard": resident blocks discarded (cudaMemDiscardBatchAsync, one
//     span per call, as deepum's pre-evictions drop about one).
// For each, the calls alone (until the last is done, and how long the
// issuing thread was held), and the calls made just after the kernel's
// launch (the kernel's duration on the GPU's clock, and the calls' time).
// Also the kernel alone ("faults_alone_us"), and the same kernel paging in
// `called` after all of it was discarded ("faults_on_discarded_us": no data
// to copy). Each repeat measures all of them again.
//
// Usage: umlab_call_overlap_probe [BLOCKS [REPEATS [PACE_US [cupti]]]]
//        (default 128 3 0)
// "cupti" enables CUPTI's unified-memory records first, as the cuda backend
// runs (they slow paging down). Prints one JSON object. Needs room on the
// GPU for both parts, and at most half of what the GPU has free.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_call_check.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/probe_kit.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBlock = size_t{2} << 20;
constexpr umlab::cuda::CudaCallCheck Ok("umlab_call_overlap_probe");

double MicrosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

enum class CallKind { kEvict, kEvictAbsent, kPrefetch, kDiscard };
// Each kind with its name in the JSON, in the order they are measured.
struct NamedKind {
  CallKind kind;
  const char* name;
};
constexpr NamedKind kKinds[] = {{CallKind::kEvict, "evict"},
                                {CallKind::kEvictAbsent, "evict_absent"},
                                {CallKind::kPrefetch, "prefetch"},
                                {CallKind::kDiscard, "discard"}};

struct CallTimes {
  double issue_us = 0;  // the issuing thread held by the calls
  double done_us = 0;   // from the first call to the last one's end
};

class Probe {
 public:
  Probe(char* region, size_t blocks, int sms)
      : faulted_(region), called_(region + blocks * kBlock), blocks_(blocks), sms_(sms) {
    cudaStreamCreateWithFlags(&kernel_stream_, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&call_stream_, cudaStreamNonBlocking);
  }
  ~Probe() {
    cudaStreamDestroy(call_stream_);
    cudaStreamDestroy(kernel_stream_);
  }

  // Everything back on the host as host data; the called blocks on the GPU
  // where the calls need them there.
  void Reset(CallKind kind) {
    const cudaMemLocation host{cudaMemLocationTypeHost, 0};
    const cudaMemLocation gpu{cudaMemLocationTypeDevice, 0};
    umlab::cuda::TimePrefetch(faulted_, 2 * blocks_ * kBlock, 2 * blocks_ * kBlock, host,
                              call_stream_);
    std::memset(faulted_, 1, 2 * blocks_ * kBlock);
    if (kind != CallKind::kPrefetch && kind != CallKind::kEvictAbsent) {
      umlab::cuda::TimePrefetch(called_, blocks_ * kBlock, blocks_ * kBlock, gpu, call_stream_);
    }
    cudaDeviceSynchronize();
  }

  // One call per called block; with `pace_us`, the n-th is made no sooner
  // than n * pace_us after the first (a policy's calls come one at a time
  // as the kernels run, not all at once).
  CallTimes Calls(CallKind kind, double pace_us) {
    const cudaMemLocation host{cudaMemLocationTypeHost, 0};
    const cudaMemLocation gpu{cudaMemLocationTypeDevice, 0};
    CallTimes times;
    const auto start = Clock::now();
    for (size_t block = 0; block < blocks_; ++block) {
      while (MicrosSince(start) < pace_us * double(block)) {
      }
      void* span = called_ + block * kBlock;
      size_t bytes = kBlock;
      switch (kind) {
        case CallKind::kEvict:
        case CallKind::kEvictAbsent:
          Ok(cudaMemPrefetchAsync(span, bytes, host, 0, call_stream_), "cudaMemPrefetchAsync");
          break;
        case CallKind::kPrefetch:
          Ok(cudaMemPrefetchAsync(span, bytes, gpu, 0, call_stream_), "cudaMemPrefetchAsync");
          break;
        case CallKind::kDiscard:
          Ok(cudaMemDiscardBatchAsync(&span, &bytes, 1, 0, call_stream_),
             "cudaMemDiscardBatchAsync");
          break;
      }
    }
    times.issue_us = MicrosSince(start);
    cudaStreamSynchronize(call_stream_);
    times.done_us = MicrosSince(start);
    return times;
  }

  // The kernel paging `faulted` (or `called`) in, launched before `during`
  // runs; its duration in us on the GPU's clock.
  template <typename During>
  double Paging(During during, bool called = false) {
    umlab::cuda::ProbeReplay replay(
        {umlab::cuda::DeviceRange{reinterpret_cast<uint64_t>(called ? called_ : faulted_), 0}},
        {blocks_ * kBlock / 4096}, static_cast<unsigned>(sms_), 1, kernel_stream_);
    during();
    const std::vector<umlab::cuda::KernelProgress> stamps = replay.Wait();
    return double(stamps[0].end_ns - stamps[0].begin_ns) / 1e3;
  }

 private:
  char* faulted_;
  char* called_;
  size_t blocks_;
  int sms_;
  cudaStream_t kernel_stream_;
  cudaStream_t call_stream_;
};

}  // namespace

int main(int argc, char** argv) {
  const long blocks_arg = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 128;
  const long repeats = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 3;
  const double pace_us = argc > 3 ? std::strtod(argv[3], nullptr) : 0;
  const bool cupti = argc > 4 && std::string(argv[4]) == "cupti";
  if (blocks_arg <= 0 || repeats <= 0 || pace_us < 0 || argc > 5 || (argc > 4 && !cupti)) {
    std::fprintf(stderr,
                 "usage: umlab_call_overlap_probe [BLOCKS [REPEATS [PACE_US [cupti]]]]  (BLOCKS "
                 "and REPEATS positive, PACE_US at least 0; default 128 3 0)\n");
    return 2;
  }
  const size_t blocks = static_cast<size_t>(blocks_arg);
  if (!Ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  cudaFree(nullptr);
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const size_t bytes = 2 * blocks * kBlock;
  if (bytes > free_bytes / 2) {
    std::fprintf(stderr,
                 "umlab_call_overlap_probe: %zu blocks need %zu MiB, over half of the GPU's %zu "
                 "MiB free: ask for fewer\n",
                 blocks, bytes >> 20, free_bytes >> 20);
    return 1;
  }
  // CUPTI's records cover only managed memory allocated after they start.
  std::unique_ptr<umlab::cuda::CuptiFaultStream> records;
  if (cupti) {
    absl::StatusOr<std::unique_ptr<umlab::cuda::CuptiFaultStream>> started =
        umlab::cuda::CuptiFaultStream::Start(0);
    if (!started.ok()) {
      std::fprintf(stderr, "umlab_call_overlap_probe: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    records = std::move(*started);
  }
  char* region = nullptr;
  if (!Ok(cudaMallocManaged(reinterpret_cast<void**>(&region), bytes), "cudaMallocManaged")) {
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("{\"gpu\":\"%s\",\"blocks\":%zu,\"pace_us\":%.1f,\"cupti\":%s,\"runs\":[",
              prop.name, blocks, pace_us, cupti ? "true" : "false");
  {
    Probe probe(region, blocks, prop.multiProcessorCount);
    for (long repeat = 0; repeat < repeats; ++repeat) {
      probe.Reset(CallKind::kPrefetch);
      const double alone = probe.Paging([] {});
      // The same paging into blocks that were resident and then discarded:
      // the driver has no data to copy for them (a zero-fill).
      probe.Reset(CallKind::kDiscard);
      probe.Calls(CallKind::kDiscard, 0);
      const double discarded = probe.Paging([] {}, /*called=*/true);
      std::printf("%s\n {\"faults_alone_us\":%.1f,\"faults_on_discarded_us\":%.1f",
                  repeat == 0 ? "" : ",", alone, discarded);
      for (const NamedKind& named : kKinds) {
        const CallKind kind = named.kind;
        probe.Reset(kind);
        const CallTimes calls_alone = probe.Calls(kind, pace_us);
        probe.Reset(kind);
        CallTimes calls_with;
        const double paging_with =
            probe.Paging([&] { calls_with = probe.Calls(kind, pace_us); });
        std::printf(",\"%s\":{\"alone_us\":%.1f,\"alone_issue_us\":%.1f,\"kernel_us\":%.1f,"
                    "\"calls_us\":%.1f,\"issue_us\":%.1f}",
                    named.name, calls_alone.done_us, calls_alone.issue_us, paging_with,
                    calls_with.done_us, calls_with.issue_us);
      }
      std::printf("}");
      std::fflush(stdout);
    }
  }
  std::printf("]}\n");
  records.reset();
  cudaFree(region);
  return Ok(cudaGetLastError(), "umlab_call_overlap_probe") ? 0 : 1;
}
