// umlab_cuda_cluster: SnuRHAC's grid programs (workloads/snurhac) on every
// GPU of this machine, through one managed range with peer access between
// the GPUs, to hold the cluster sim's predictions (`umlab snurhac`) against
// real hardware. docs/snurhac.md, "The cuda run", says what is measured and
// what maps to SnuRHAC's mechanisms; cluster_launches.h how a launch is laid
// out. It needs a GPU; without one it says so in one line.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backends/cuda/cluster_launches.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/replay_kernel.h"
#include "emu/device_presets.h"
#include "workloads/grid_workload.h"

namespace umlab::cuda {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: umlab_cuda_cluster [--app=NAME[:K=V]]... [--scale=X] [--devices=1,2] "
    "[--schemes=none,sp] [--read-mostly=on|off] [--cupti=on|off] [--device=PRESET] "
    "[--device-param=K=V]... "
    "[--format=text|json] [--json=FILE]\n"
    "  Runs SnuRHAC's grid programs on the GPUs of this machine (managed memory, peer access)\n"
    "  and on one GPU with explicit copies (the baseline). --app: a grid program, repeatable\n"
    "  (default gemm); --scale: fraction of its thesis size; --devices: GPU counts (default 1\n"
    "  to all); --schemes: none (demand paging) and sp (static prefetching); --read-mostly:\n"
    "  cudaMemAdviseSetReadMostly on arrays a kernel only reads (default on); --cupti: count\n"
    "  faults and bytes moved (default on); --device: the preset giving the programs' compute\n"
    "  times and issuers, as for umlab snurhac (default h200), with --device-param overrides;\n"
    "  --json: also write the JSON report to FILE. docs/snurhac.md.\n";

Nanos Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
}

absl::Status Cuda(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, " failed: ", cudaGetErrorString(error)));
}

// Returns a failed status from the enclosing function.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    if (absl::Status s_ = (expr); !s_.ok()) return s_; \
  } while (0)

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

struct Options {
  std::vector<std::string> apps;
  std::optional<std::string> scale;
  std::vector<int> device_counts;
  std::vector<ClusterScheme> schemes;
  bool read_mostly = true;
  bool cupti = true;
  std::string preset = "h200";
  std::vector<std::string> device_params;  // K=V overrides of the preset
  bool json = false;
  std::string json_file;  // also writes the JSON here
};

// --- The machine -------------------------------------------------------------

struct PeerLink {
  int from = 0, to = 0;
  bool can_access = false;
  bool enabled = false;
  int performance_rank = -1;  // the driver's relative rank of the link
  bool native_atomics = false;
};

struct Machine {
  int gpus = 0;
  std::vector<std::string> names;
  std::vector<uint64_t> free_bytes, total_bytes;
  uint64_t host_bytes = 0;
  std::vector<PeerLink> peers;
};

absl::StatusOr<Machine> ProbeMachine(int gpus_used) {
  Machine machine;
  if (cudaGetDeviceCount(&machine.gpus) != cudaSuccess || machine.gpus == 0) {
    return absl::FailedPreconditionError(
        "no CUDA GPU here; run umlab_cuda_cluster on the device machine (the cluster sim is "
        "'umlab snurhac')");
  }
  if (gpus_used > machine.gpus) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--devices asks for %d GPUs and this machine has %d", gpus_used, machine.gpus));
  }
  machine.host_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                       static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  for (int d = 0; d < gpus_used; ++d) {
    RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
    cudaFree(nullptr);  // the context
    cudaDeviceProp prop{};
    RETURN_IF_ERROR(Cuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties"));
    if (!prop.concurrentManagedAccess) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "GPU %d (%s) lacks concurrent managed access; SnuRHAC's run needs demand paging",
          d, prop.name));
    }
    size_t free_bytes = 0, total_bytes = 0;
    RETURN_IF_ERROR(Cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
    machine.names.push_back(prop.name);
    machine.free_bytes.push_back(free_bytes);
    machine.total_bytes.push_back(total_bytes);
  }
  // Peer access between every pair that supports it: a GPU then maps the
  // other's memory, and the driver may serve a fault from a peer directly.
  for (int from = 0; from < gpus_used; ++from) {
    for (int to = 0; to < gpus_used; ++to) {
      if (from == to) continue;
      PeerLink link{from, to};
      int can = 0, rank = -1, atomics = 0;
      cudaDeviceCanAccessPeer(&can, from, to);
      link.can_access = can != 0;
      if (link.can_access) {
        cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, from, to);
        cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, from, to);
        RETURN_IF_ERROR(Cuda(cudaSetDevice(from), "cudaSetDevice"));
        const cudaError_t error = cudaDeviceEnablePeerAccess(to, 0);
        link.enabled = error == cudaSuccess || error == cudaErrorPeerAccessAlreadyEnabled;
        cudaGetLastError();  // an already-enabled pair leaves its error behind
      }
      link.performance_rank = rank;
      link.native_atomics = atomics != 0;
      machine.peers.push_back(link);
    }
  }
  return machine;
}

// One line naming the limit and a scale that fits, or OK.
absl::Status CheckFootprint(const GridProgram& program, const Machine& machine, int gpus_used,
                            const std::string& app, const std::optional<std::string>& scale) {
  const uint64_t footprint = program.footprint_bytes();
  uint64_t gpu_limit = UINT64_MAX;
  for (int d = 0; d < gpus_used; ++d) gpu_limit = std::min(gpu_limit, machine.free_bytes[d]);
  // The replay kernel's page lists, counters and the CUDA context's own
  // needs come out of the same memory: keep a tenth back.
  gpu_limit = gpu_limit / 10 * 9;
  const uint64_t host_limit = machine.host_bytes / 2;
  const uint64_t limit = std::min(gpu_limit, host_limit);
  if (footprint <= limit) return absl::OkStatus();
  double current = 1;
  if (scale.has_value() && !absl::SimpleAtod(*scale, &current)) current = 1;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs %.2f GiB of managed memory, more than %s (%.2f GiB); scale it down, e.g. "
      "--scale=%.3g",
      app, footprint / double(1 << 30),
      gpu_limit <= host_limit ? "a tenth short of the smallest GPU's free memory"
                              : "half the host's RAM",
      limit / double(1 << 30), current * 0.9 * double(limit) / double(footprint)));
}

// --- Runs ------------------------------------------------------------------------

struct KernelTimes {
  std::string name;
  Nanos host_ns = 0;                // first launch call to the last device's sync
  std::vector<Nanos> device_ns;     // per device, end - begin stamps (0: no share)
};

struct CuptiCounts {
  bool available = false;
  std::string note;
  std::vector<uint64_t> faults, fault_records, h2d, d2h;  // per GPU
  std::vector<std::vector<uint64_t>> d2d;                 // [source][destination]
  std::map<std::string, uint64_t> bytes_by_cause;
  uint64_t dropped = 0;
};

struct RunResult {
  int devices = 1;
  std::string scheme;  // "baseline", "none", "sp"
  Nanos wall_ns = 0, copy_in_ns = 0, kernels_ns = 0, copy_out_ns = 0;
  int single_device_kernels = 0;
  uint64_t prefetch_bytes = 0;
  std::vector<KernelTimes> kernels;
  CuptiCounts cupti;
};

// The page lists, counters and progress slots of every launch on one GPU,
// in place before the timed run.
struct DeviceBuffers {
  DeviceRange* ranges = nullptr;
  KernelCounters* counters = nullptr;
  std::vector<uint64_t> first_range;  // per launch
  cudaStream_t kernels = nullptr, prefetches = nullptr;
};

class LaunchBuffers {
 public:
  LaunchBuffers() = default;
  LaunchBuffers(const LaunchBuffers&) = delete;
  LaunchBuffers& operator=(const LaunchBuffers&) = delete;
  ~LaunchBuffers() {
    for (size_t d = 0; d < devices_.size(); ++d) {
      cudaSetDevice(static_cast<int>(d));
      cudaFree(devices_[d].ranges);
      cudaFree(devices_[d].counters);
      if (devices_[d].kernels != nullptr) cudaStreamDestroy(devices_[d].kernels);
      if (devices_[d].prefetches != nullptr) cudaStreamDestroy(devices_[d].prefetches);
    }
    if (progress_ != nullptr) cudaFreeHost(progress_);
  }

  absl::Status Prepare(const std::vector<ClusterLaunch>& launches, int devices) {
    devices_.resize(devices);
    const size_t slots = launches.size() * devices;
    RETURN_IF_ERROR(Cuda(cudaHostAlloc(reinterpret_cast<void**>(&progress_),
                                       std::max<size_t>(1, slots) * sizeof(KernelProgress),
                                       cudaHostAllocMapped | cudaHostAllocPortable),
                         "cudaHostAlloc"));
    std::memset(progress_, 0, std::max<size_t>(1, slots) * sizeof(KernelProgress));
    for (int d = 0; d < devices; ++d) {
      DeviceBuffers& buffers = devices_[d];
      RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
      RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&buffers.kernels, cudaStreamNonBlocking),
                           "cudaStreamCreate"));
      RETURN_IF_ERROR(Cuda(cudaStreamCreateWithFlags(&buffers.prefetches, cudaStreamNonBlocking),
                           "cudaStreamCreate"));
      std::vector<DeviceRange> all;
      for (const ClusterLaunch& launch : launches) {
        buffers.first_range.push_back(all.size());
        const auto& ranges = launch.devices[d].ranges;
        all.insert(all.end(), ranges.begin(), ranges.end());
      }
      RETURN_IF_ERROR(Cuda(cudaMalloc(reinterpret_cast<void**>(&buffers.ranges),
                                      std::max<size_t>(1, all.size()) * sizeof(DeviceRange)),
                           "cudaMalloc (page lists)"));
      RETURN_IF_ERROR(Cuda(cudaMemcpy(buffers.ranges, all.data(), all.size() * sizeof(DeviceRange),
                                      cudaMemcpyHostToDevice),
                           "cudaMemcpy (page lists)"));
      const size_t counters = std::max<size_t>(1, launches.size()) * sizeof(KernelCounters);
      RETURN_IF_ERROR(Cuda(cudaMalloc(reinterpret_cast<void**>(&buffers.counters), counters),
                           "cudaMalloc (counters)"));
      RETURN_IF_ERROR(Cuda(cudaMemset(buffers.counters, 0, counters), "cudaMemset"));
      // An empty kernel: the context's lazy set-up happens now, not in the
      // first timed launch.
      ReplayKernelArgs warm;
      warm.counters = buffers.counters;
      warm.progress = progress_;
      RETURN_IF_ERROR(Cuda(LaunchReplayKernel(warm, 1, buffers.kernels), "warm-up launch"));
      RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "warm-up kernel"));
      RETURN_IF_ERROR(Cuda(cudaMemset(buffers.counters, 0, counters), "cudaMemset"));
    }
    std::memset(progress_, 0, std::max<size_t>(1, slots) * sizeof(KernelProgress));
    devices_count_ = devices;
    return absl::OkStatus();
  }

  // Launches device d's share of launch k on its kernel stream.
  cudaError_t Launch(const ClusterLaunch& launch, size_t k, int d, unsigned warps_per_block) {
    const DeviceLaunch& share = launch.devices[d];
    DeviceBuffers& buffers = devices_[d];
    ReplayKernelArgs args;
    args.ranges = buffers.ranges + buffers.first_range[k];
    args.range_count = share.ranges.size();
    args.accesses = share.accesses;
    args.workers = static_cast<unsigned>(std::max<uint64_t>(1, share.pace.issuers));
    args.per_access_ns = static_cast<uint64_t>(share.pace.step_ps / 1000);
    args.compute_ns = static_cast<uint64_t>(share.compute_ns);
    args.counters = buffers.counters + k;
    args.progress = Progress(k, d);
    return LaunchReplayKernel(args, warps_per_block, buffers.kernels);
  }

  KernelProgress* Progress(size_t k, int d) const { return progress_ + k * devices_count_ + d; }
  DeviceBuffers& device(int d) { return devices_[d]; }

 private:
  std::vector<DeviceBuffers> devices_;
  KernelProgress* progress_ = nullptr;
  int devices_count_ = 0;
};

// Whether a device has anything to run in a launch.
bool HasWork(const DeviceLaunch& share) { return share.accesses > 0 || share.compute_ns > 0; }

void CollectCupti(CuptiFaultStream& stream, int gpus, CuptiCounts& counts) {
  cudaDeviceSynchronize();
  stream.Flush(/*forced=*/true);
  std::vector<UnifiedMemoryRecord> records;
  stream.Drain(records);
  counts.faults.assign(gpus, 0);
  counts.fault_records.assign(gpus, 0);
  counts.h2d.assign(gpus, 0);
  counts.d2h.assign(gpus, 0);
  counts.d2d.assign(gpus, std::vector<uint64_t>(gpus, 0));
  auto in_range = [gpus](uint32_t id) { return id < static_cast<uint32_t>(gpus); };
  for (const UnifiedMemoryRecord& record : records) {
    switch (record.kind) {
      case UnifiedMemoryRecord::Kind::kGpuPageFault:
        if (!in_range(record.source)) break;
        counts.faults[record.source] += record.value;
        ++counts.fault_records[record.source];
        break;
      case UnifiedMemoryRecord::Kind::kBytesHostToDevice:
        if (in_range(record.destination)) counts.h2d[record.destination] += record.value;
        counts.bytes_by_cause[absl::StrCat("h2d_", CauseName(record.cause))] += record.value;
        break;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToHost:
        if (in_range(record.source)) counts.d2h[record.source] += record.value;
        counts.bytes_by_cause[absl::StrCat("d2h_", CauseName(record.cause))] += record.value;
        break;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToDevice:
        if (in_range(record.source) && in_range(record.destination)) {
          counts.d2d[record.source][record.destination] += record.value;
        }
        counts.bytes_by_cause[absl::StrCat("d2d_", CauseName(record.cause))] += record.value;
        break;
      default:
        break;
    }
  }
  counts.dropped = stream.dropped();
}

// SnuRHAC's host copy threads (§6.1: "up to eight").
constexpr int kCopyThreads = 8;

// Writes every copied-in array's bytes from the host, the arrays' bytes
// dealt out to `threads` threads in equal page-aligned slices.
void CopyInOnHostThreads(const GridProgram& program, uint64_t base, int threads) {
  std::vector<ByteRange> slices;
  for (const GridArray& array : program.arrays) {
    if (!array.copied_in) continue;
    const uint64_t slice = AlignUp((array.bytes + threads - 1) / threads, kPageSize);
    for (uint64_t offset = 0; offset < array.bytes; offset += slice) {
      const uint64_t begin = base + array.address + offset;
      slices.push_back({begin, begin + std::min(slice, array.bytes - offset)});
    }
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&slices, t, threads] {
      for (size_t i = static_cast<size_t>(t); i < slices.size(); i += threads) {
        std::memset(reinterpret_cast<char*>(slices[i].begin), 1, slices[i].size());
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
}

// SnuRHAC on `devices` GPUs under `scheme`: copy-in by the host into the
// managed range, every launch split as the sim splits it, copy-out by the
// host.
absl::StatusOr<RunResult> RunCluster(const GridProgram& program, const DeviceConfig& preset,
                                     int devices, ClusterScheme scheme, const Options& options) {
  RunResult result;
  result.devices = devices;
  result.scheme = ClusterSchemeName(scheme);
  char* raw = nullptr;
  const uint64_t footprint = program.footprint_bytes();
  RETURN_IF_ERROR(Cuda(cudaSetDevice(0), "cudaSetDevice"));
  // CUPTI reports unified-memory activity only for managed memory allocated
  // after it starts (as in cuda_backend.cc): started after the allocation,
  // the first run of a process counted nothing (H100 pair, 2026-11-26).
  std::unique_ptr<CuptiFaultStream> cupti;
  if (options.cupti) {
    absl::StatusOr<std::unique_ptr<CuptiFaultStream>> started =
        CuptiFaultStream::Start(0, 64 << 10, false, /*all_devices=*/true);
    if (started.ok()) {
      cupti = *std::move(started);
      result.cupti.available = true;
    } else {
      result.cupti.note = std::string(started.status().message());
    }
  } else {
    result.cupti.note = "off (--cupti=off)";
  }

  RETURN_IF_ERROR(Cuda(cudaMallocManaged(reinterpret_cast<void**>(&raw), footprint + kBlockSize),
                       "cudaMallocManaged"));
  std::unique_ptr<char, decltype(&cudaFree)> managed(raw, &cudaFree);
  const uint64_t base = AlignUp(reinterpret_cast<uint64_t>(raw), kBlockSize);
  ClusterLaunchOptions plan_options;
  plan_options.devices = devices;
  plan_options.scheme = scheme;
  plan_options.read_mostly = options.read_mostly;
  plan_options.streams = static_cast<uint64_t>(std::max(1, preset.access_streams()));
  plan_options.base = base;
  absl::StatusOr<std::vector<ClusterLaunch>> launches = PlanClusterLaunches(program, plan_options);
  if (!launches.ok()) return launches.status();
  LaunchBuffers buffers;
  RETURN_IF_ERROR(buffers.Prepare(*launches, devices));
  const unsigned warps_per_block = static_cast<unsigned>(std::max(1, preset.warps_per_sm));
  // The program's host buffers for its outputs, touched before the clock
  // starts (a program's own arrays are populated): the copy-out then costs
  // the managed pages' way back, not the buffer's first-touch faults.
  std::unique_ptr<char[]> out(new char[footprint]);
  for (const GridArray& array : program.arrays) {
    if (array.copied_out) std::memset(out.get() + array.address, 0, array.bytes);
  }

  const auto start = Clock::now();
  // SnuRHAC's cudaMemcpy into the device is a host memcpy into the host's
  // UM space on up to eight threads (§6.1), as the sim models it
  // (ClusterConfig::host_copy_bytes_per_second): the host's first touch
  // places the pages in its memory. One thread took 9-13x the sim's time.
  CopyInOnHostThreads(program, base, kCopyThreads);
  result.copy_in_ns = Since(start);
  const auto kernels_start = Clock::now();
  for (size_t k = 0; k < launches->size(); ++k) {
    const ClusterLaunch& launch = (*launches)[k];
    if (launch.single_device) ++result.single_device_kernels;
    for (const ReadMostlyAdvice& advice : launch.advice) {
      const GridArray& array = program.arrays[advice.array];
      RETURN_IF_ERROR(Cuda(
          cudaMemAdvise(reinterpret_cast<void*>(base + array.address), array.bytes,
                        advice.set ? cudaMemAdviseSetReadMostly : cudaMemAdviseUnsetReadMostly,
                        cudaMemLocation{cudaMemLocationTypeDevice, 0}),
          "cudaMemAdvise"));
    }
    const auto launched = Clock::now();
    // One host thread per GPU: a prefetch call may hold its caller while
    // the driver migrates, and must not hold up the other GPUs' launches.
    std::vector<cudaError_t> errors(devices, cudaSuccess);
    std::vector<std::thread> threads;
    for (int d = 0; d < devices; ++d) {
      threads.emplace_back([&, d] {
        const DeviceLaunch& share = launch.devices[d];
        cudaSetDevice(d);
        // The kernel first: a prefetch call holds its thread until its
        // migration is done (measured on the H100 pair), and SnuRHAC-SP's
        // prefetches run beside the kernel (§6.5.1), as in the sim.
        if (HasWork(share)) {
          const cudaError_t error = buffers.Launch(launch, k, d, warps_per_block);
          if (error != cudaSuccess && errors[d] == cudaSuccess) errors[d] = error;
        }
        const cudaMemLocation here{cudaMemLocationTypeDevice, d};
        for (const ByteRange& range : share.prefetch) {
          const cudaError_t error =
              cudaMemPrefetchAsync(reinterpret_cast<void*>(range.begin), range.size(), here, 0,
                                   buffers.device(d).prefetches);
          if (error != cudaSuccess && errors[d] == cudaSuccess) errors[d] = error;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int d = 0; d < devices; ++d) {
      RETURN_IF_ERROR(Cuda(errors[d], absl::StrFormat("launch of %s on GPU %d", launch.kernel, d)));
      for (const ByteRange& range : launch.devices[d].prefetch) {
        result.prefetch_bytes += range.size();
      }
    }
    // SnuRHAC ends a kernel when every node has ended its share (§6.3).
    for (int d = 0; d < devices; ++d) {
      RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(buffers.device(d).kernels),
                           absl::StrFormat("%s on GPU %d", launch.kernel, d)));
    }
    KernelTimes times{launch.kernel, Since(launched), {}};
    for (int d = 0; d < devices; ++d) {
      const KernelProgress* progress = buffers.Progress(k, d);
      times.device_ns.push_back(HasWork(launch.devices[d]) && progress->end_ns > progress->begin_ns
                                    ? static_cast<Nanos>(progress->end_ns - progress->begin_ns)
                                    : 0);
    }
    result.kernels.push_back(std::move(times));
  }
  // Prefetches still under way belong to the kernels.
  for (int d = 0; d < devices; ++d) {
    RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(buffers.device(d).prefetches), "prefetches"));
  }
  result.kernels_ns = Since(kernels_start);
  const auto copy_out = Clock::now();
  for (const GridArray& array : program.arrays) {
    if (array.copied_out) {
      std::memcpy(out.get() + array.address, reinterpret_cast<const char*>(base + array.address),
                  array.bytes);
    }
  }
  result.copy_out_ns = Since(copy_out);
  result.wall_ns = Since(start);
  if (cupti != nullptr) CollectCupti(*cupti, devices, result.cupti);
  return result;
}

// The thesis's baseline (§7.3.2): one GPU, cudaMalloc, explicit copies from
// pageable host memory, every kernel with its data resident.
absl::StatusOr<RunResult> RunBaseline(const GridProgram& program, const DeviceConfig& preset) {
  RunResult result;
  result.scheme = "baseline";
  RETURN_IF_ERROR(Cuda(cudaSetDevice(0), "cudaSetDevice"));
  const uint64_t footprint = program.footprint_bytes();
  char* raw = nullptr;
  RETURN_IF_ERROR(Cuda(cudaMalloc(reinterpret_cast<void**>(&raw), footprint + kBlockSize),
                       "cudaMalloc"));
  std::unique_ptr<char, decltype(&cudaFree)> memory(raw, &cudaFree);
  const uint64_t base = AlignUp(reinterpret_cast<uint64_t>(raw), kBlockSize);
  ClusterLaunchOptions plan_options;
  plan_options.read_mostly = false;
  plan_options.streams = static_cast<uint64_t>(std::max(1, preset.access_streams()));
  plan_options.base = base;
  absl::StatusOr<std::vector<ClusterLaunch>> launches = PlanClusterLaunches(program, plan_options);
  if (!launches.ok()) return launches.status();
  LaunchBuffers buffers;
  RETURN_IF_ERROR(buffers.Prepare(*launches, 1));
  const unsigned warps_per_block = static_cast<unsigned>(std::max(1, preset.warps_per_sm));
  std::vector<char> host(footprint, 1);  // touched now: pageable, but populated

  const auto start = Clock::now();
  for (const GridArray& array : program.arrays) {
    if (!array.copied_in) continue;
    RETURN_IF_ERROR(Cuda(cudaMemcpy(reinterpret_cast<void*>(base + array.address),
                                    host.data() + array.address, array.bytes,
                                    cudaMemcpyHostToDevice),
                         "cudaMemcpy in"));
  }
  result.copy_in_ns = Since(start);
  const auto kernels_start = Clock::now();
  for (size_t k = 0; k < launches->size(); ++k) {
    const ClusterLaunch& launch = (*launches)[k];
    const auto launched = Clock::now();
    if (HasWork(launch.devices[0])) {
      RETURN_IF_ERROR(Cuda(buffers.Launch(launch, k, 0, warps_per_block), "launch"));
    }
    RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(buffers.device(0).kernels), launch.kernel));
    const KernelProgress* progress = buffers.Progress(k, 0);
    result.kernels.push_back(
        {launch.kernel, Since(launched),
         {progress->end_ns > progress->begin_ns
              ? static_cast<Nanos>(progress->end_ns - progress->begin_ns)
              : 0}});
  }
  result.kernels_ns = Since(kernels_start);
  const auto copy_out = Clock::now();
  for (const GridArray& array : program.arrays) {
    if (!array.copied_out) continue;
    RETURN_IF_ERROR(Cuda(cudaMemcpy(host.data() + array.address,
                                    reinterpret_cast<const void*>(base + array.address),
                                    array.bytes, cudaMemcpyDeviceToHost),
                         "cudaMemcpy out"));
  }
  result.copy_out_ns = Since(copy_out);
  result.wall_ns = Since(start);
  result.cupti.note = "baseline: no managed memory";
  return result;
}

// --- Reports --------------------------------------------------------------------

struct ProgramReport {
  std::string app;
  uint64_t footprint = 0;
  size_t kernels = 0;
  RunResult baseline;
  std::vector<RunResult> runs;
};

// Quotes and backslashes escaped; control characters dropped.
std::string JsonText(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string JsonList(const std::vector<uint64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

std::string RunJson(const RunResult& run, Nanos baseline_ns) {
  std::string json = absl::StrFormat(
      "{\"devices\":%d,\"scheme\":\"%s\",\"wall_ns\":%d,\"copy_in_ns\":%d,\"kernels_ns\":%d,"
      "\"copy_out_ns\":%d,\"speedup\":%.4f,\"single_device_kernels\":%d,"
      "\"prefetch_bytes\":%d,\"kernels\":[",
      run.devices, run.scheme, run.wall_ns, run.copy_in_ns, run.kernels_ns, run.copy_out_ns,
      run.wall_ns > 0 ? double(baseline_ns) / double(run.wall_ns) : 0.0,
      run.single_device_kernels, run.prefetch_bytes);
  for (size_t k = 0; k < run.kernels.size(); ++k) {
    const KernelTimes& kernel = run.kernels[k];
    std::vector<uint64_t> device(kernel.device_ns.begin(), kernel.device_ns.end());
    absl::StrAppendFormat(&json, "%s{\"name\":\"%s\",\"host_ns\":%d,\"device_ns\":%s}",
                          k == 0 ? "" : ",", JsonText(kernel.name), kernel.host_ns,
                          JsonList(device));
  }
  const CuptiCounts& c = run.cupti;
  absl::StrAppendFormat(&json, "],\"cupti\":{\"available\":%s,\"note\":\"%s\"",
                        c.available ? "true" : "false", JsonText(c.note));
  if (c.available) {
    std::vector<std::string> d2d;
    for (const auto& row : c.d2d) d2d.push_back(JsonList(row));
    absl::StrAppendFormat(&json,
                          ",\"faults\":%s,\"fault_records\":%s,\"h2d_bytes\":%s,\"d2h_bytes\":%s,"
                          "\"d2d_bytes\":[%s],\"dropped_records\":%d,\"bytes_by_cause\":{",
                          JsonList(c.faults), JsonList(c.fault_records), JsonList(c.h2d),
                          JsonList(c.d2h), absl::StrJoin(d2d, ","), c.dropped);
    bool first = true;
    for (const auto& [cause, bytes] : c.bytes_by_cause) {
      absl::StrAppendFormat(&json, "%s\"%s\":%d", first ? "" : ",", cause, bytes);
      first = false;
    }
    json += "}";
  }
  json += "}}";
  return json;
}

std::string Json(const Machine& machine, const Options& options,
                 const std::vector<ProgramReport>& programs) {
  std::string json = "{\"gpus\":[";
  for (size_t d = 0; d < machine.names.size(); ++d) {
    absl::StrAppendFormat(&json, "%s{\"index\":%d,\"name\":\"%s\",\"total_bytes\":%d}",
                          d == 0 ? "" : ",", d, JsonText(machine.names[d]),
                          machine.total_bytes[d]);
  }
  json += "],\"peers\":[";
  for (size_t i = 0; i < machine.peers.size(); ++i) {
    const PeerLink& p = machine.peers[i];
    absl::StrAppendFormat(&json,
                          "%s{\"from\":%d,\"to\":%d,\"can_access\":%s,\"enabled\":%s,"
                          "\"performance_rank\":%d,\"native_atomics\":%s}",
                          i == 0 ? "" : ",", p.from, p.to, p.can_access ? "true" : "false",
                          p.enabled ? "true" : "false", p.performance_rank,
                          p.native_atomics ? "true" : "false");
  }
  absl::StrAppendFormat(&json,
                        "],\"host_bytes\":%d,\"device_preset\":\"%s\",\"read_mostly\":%s,"
                        "\"programs\":[",
                        machine.host_bytes, JsonText(options.preset),
                        options.read_mostly ? "true" : "false");
  for (size_t i = 0; i < programs.size(); ++i) {
    const ProgramReport& p = programs[i];
    absl::StrAppendFormat(&json,
                          "%s\n{\"app\":\"%s\",\"footprint_bytes\":%d,\"kernels\":%d,"
                          "\"baseline\":%s,\"runs\":[",
                          i == 0 ? "" : ",", JsonText(p.app), p.footprint, p.kernels,
                          RunJson(p.baseline, p.baseline.wall_ns));
    for (size_t r = 0; r < p.runs.size(); ++r) {
      absl::StrAppend(&json, r == 0 ? "\n " : ",\n ", RunJson(p.runs[r], p.baseline.wall_ns));
    }
    json += "]}";
  }
  json += "]}\n";
  return json;
}

std::string Text(const Machine& machine, const std::vector<ProgramReport>& programs) {
  std::string text;
  for (size_t d = 0; d < machine.names.size(); ++d) {
    absl::StrAppendFormat(&text, "GPU %d: %s, %.1f GiB\n", d, machine.names[d],
                          machine.total_bytes[d] / double(1 << 30));
  }
  for (const PeerLink& p : machine.peers) {
    absl::StrAppendFormat(&text, "peer %d->%d: %s (performance rank %d, native atomics %s)\n",
                          p.from, p.to,
                          p.enabled ? "enabled" : (p.can_access ? "not enabled" : "unsupported"),
                          p.performance_rank, p.native_atomics ? "yes" : "no");
  }
  absl::StrAppendFormat(&text, "%-22s %3s %-8s %10s %8s %9s %9s %10s %10s %10s %10s %4s\n",
                        "program", "dev", "scheme", "wall ms", "speedup", "kern ms", "max dev",
                        "faults", "h2d MB", "d2h MB", "d2d MB", "1dev");
  auto row = [&](const std::string& app, const RunResult& run, Nanos baseline) {
    Nanos device = 0;
    for (const KernelTimes& kernel : run.kernels) {
      device += *std::max_element(kernel.device_ns.begin(), kernel.device_ns.end());
    }
    uint64_t faults = 0, h2d = 0, d2h = 0, d2d = 0;
    for (uint64_t v : run.cupti.faults) faults += v;
    for (uint64_t v : run.cupti.h2d) h2d += v;
    for (uint64_t v : run.cupti.d2h) d2h += v;
    for (const auto& r : run.cupti.d2d) {
      for (uint64_t v : r) d2d += v;
    }
    const bool counted = run.cupti.available;
    absl::StrAppendFormat(&text,
                          "%-22s %3d %-8s %10.1f %8.3f %9.1f %9.1f %10s %10s %10s %10s %4d\n",
                          app, run.devices, run.scheme, run.wall_ns / 1e6,
                          double(baseline) / double(std::max<Nanos>(1, run.wall_ns)),
                          run.kernels_ns / 1e6, device / 1e6,
                          counted ? absl::StrCat(faults) : "-",
                          counted ? absl::StrFormat("%.1f", h2d / 1e6) : "-",
                          counted ? absl::StrFormat("%.1f", d2h / 1e6) : "-",
                          counted ? absl::StrFormat("%.1f", d2d / 1e6) : "-",
                          run.single_device_kernels);
  };
  for (const ProgramReport& p : programs) {
    row(p.app, p.baseline, p.baseline.wall_ns);
    for (const RunResult& run : p.runs) row(p.app, run, p.baseline.wall_ns);
  }
  return text;
}

// --- Arguments --------------------------------------------------------------------

absl::StatusOr<Options> ParseOptions(int argc, char** argv) {
  Options options;
  std::string devices, schemes = "none,sp";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t equals = arg.find('=');
    const std::string key = arg.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
    if (key == "--app") {
      options.apps.push_back(value);
    } else if (key == "--scale") {
      options.scale = value;
    } else if (key == "--devices") {
      devices = value;
    } else if (key == "--schemes") {
      schemes = value;
    } else if (key == "--read-mostly" && (value == "on" || value == "off")) {
      options.read_mostly = value == "on";
    } else if (key == "--cupti" && (value == "on" || value == "off")) {
      options.cupti = value == "on";
    } else if (key == "--device") {
      options.preset = value;
    } else if (key == "--device-param" && !value.empty()) {
      options.device_params.push_back(value);
    } else if (key == "--format" && (value == "text" || value == "json")) {
      options.json = value == "json";
    } else if (key == "--json" && !value.empty()) {
      options.json_file = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown or malformed option '", arg, "'"));
    }
  }
  if (options.apps.empty()) options.apps.push_back("gemm");
  if (!devices.empty()) {
    for (absl::string_view item : absl::StrSplit(devices, ',')) {
      int count = 0;
      if (!absl::SimpleAtoi(item, &count) || count < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("--devices takes GPU counts >= 1, such as 1,2; not '", item, "'"));
      }
      options.device_counts.push_back(count);
    }
  }
  for (absl::string_view item : absl::StrSplit(schemes, ',')) {
    absl::StatusOr<ClusterScheme> scheme = ParseClusterScheme(std::string(item));
    if (!scheme.ok()) return scheme.status();
    options.schemes.push_back(*scheme);
  }
  return options;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << kUsage;
      return 0;
    }
  }
  auto fail = [](const absl::Status& status, int code) {
    std::fprintf(stderr, "umlab_cuda_cluster: %s\n", std::string(status.message()).c_str());
    return code;
  };
  absl::StatusOr<Options> options = ParseOptions(argc, argv);
  if (!options.ok()) return fail(options.status(), 2);
  absl::StatusOr<DeviceConfig> preset = DevicePreset(options->preset);
  if (!preset.ok()) return fail(preset.status(), 2);
  for (const std::string& overrides : options->device_params) {
    preset = ApplyDeviceOverrides(*preset, overrides);
    if (!preset.ok()) return fail(preset.status(), 2);
  }
  // The programs first: a bad name fails before any GPU is touched.
  std::vector<std::pair<std::string, std::unique_ptr<GridProgram>>> programs;
  for (std::string app : options->apps) {
    if (options->scale.has_value()) {
      absl::StrAppend(&app, app.find(':') != std::string::npos ? "," : ":", "scale=",
                      *options->scale);
    }
    absl::StatusOr<std::unique_ptr<GridProgram>> program =
        GridWorkloads().Create(app, preset->compute);
    if (!program.ok()) return fail(program.status(), 2);
    if (absl::Status status = (*program)->Validate(); !status.ok()) return fail(status, 2);
    programs.emplace_back(app, *std::move(program));
  }
  int most = 0;
  for (int count : options->device_counts) most = std::max(most, count);
  int available = 0;
  if (cudaGetDeviceCount(&available) != cudaSuccess || available == 0) {
    return fail(absl::FailedPreconditionError(
                    "no CUDA GPU here; run it on the device machine (the cluster sim is "
                    "'umlab snurhac')"),
                1);
  }
  if (options->device_counts.empty()) {
    for (int count = 1; count <= available; ++count) options->device_counts.push_back(count);
    most = available;
  }
  absl::StatusOr<Machine> machine = ProbeMachine(most);
  if (!machine.ok()) return fail(machine.status(), machine.status().code() ==
                                 absl::StatusCode::kInvalidArgument ? 2 : 1);
  for (const auto& [app, program] : programs) {
    if (absl::Status status = CheckFootprint(*program, *machine, most, app, options->scale);
        !status.ok()) {
      return fail(status, 2);
    }
  }
  std::vector<ProgramReport> reports;
  for (const auto& [app, program] : programs) {
    ProgramReport report{app, program->footprint_bytes(), program->launches.size(), {}, {}};
    absl::StatusOr<RunResult> baseline = RunBaseline(*program, *preset);
    if (!baseline.ok()) return fail(baseline.status(), 1);
    report.baseline = *std::move(baseline);
    for (ClusterScheme scheme : options->schemes) {
      for (int count : options->device_counts) {
        absl::StatusOr<RunResult> run = RunCluster(*program, *preset, count, scheme, *options);
        if (!run.ok()) return fail(run.status(), 1);
        report.runs.push_back(*std::move(run));
        std::fprintf(stderr, "%s: %d GPUs, %s: %.1f ms\n", app.c_str(), count,
                     ClusterSchemeName(scheme), report.runs.back().wall_ns / 1e6);
      }
    }
    reports.push_back(std::move(report));
  }
  const std::string json = Json(*machine, *options, reports);
  if (!options->json_file.empty()) {
    FILE* file = std::fopen(options->json_file.c_str(), "w");
    if (file == nullptr || std::fputs(json.c_str(), file) < 0 || std::fclose(file) != 0) {
      return fail(absl::UnavailableError(absl::StrCat("cannot write ", options->json_file)), 1);
    }
  }
  std::cout << (options->json ? json : Text(*machine, reports));
  return 0;
}

}  // namespace
}  // namespace umlab::cuda

int main(int argc, char** argv) { return umlab::cuda::Main(argc, argv); }
