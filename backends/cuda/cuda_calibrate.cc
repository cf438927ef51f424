// umlab_cuda_calibrate: measures what the sim's device preset needs on the
// GPU at hand and prints it as JSON: prefetch (migration) bandwidth and
// per-call cost in each direction, demand-paging throughput, per-fault
// latency, the gap between back-to-back kernels, and what one resident
// access costs the replay kernel. docs/devices.md says how the h200 preset
// uses them. It also shows what each way of letting go of device memory
// (write-back, discard, discard and prefetch to the host) leaves for the
// driver to evict, from CUPTI's records, and what a policy's calls cost when
// the driver must evict to serve them.
//
// It allocates at most 1 GiB of managed memory, and never more than half
// of what the GPU has free.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_call_check.h"
#include "backends/cuda/cupti_fault_stream.h"
#include "backends/cuda/gpu_balloon.h"
#include "backends/cuda/probe_kit.h"
#include "backends/cuda/replay_kernel.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr umlab::cuda::CudaCallCheck Ok("umlab_cuda_calibrate");

using umlab::cuda::DeviceRange;
using umlab::cuda::KernelProgress;
using umlab::cuda::Replay;
using umlab::cuda::TimePrefetch;

// Says why a step failed, in one line; whether it did.
bool Failed(const absl::Status& status) {
  if (status.ok()) return false;
  std::fprintf(stderr, "umlab_cuda_calibrate: %s\n", std::string(status.message()).c_str());
  return true;
}

}  // namespace

int main() {
  int device = 0;
  if (!Ok(cudaSetDevice(device), "cudaSetDevice")) return 1;
  cudaFree(nullptr);
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  const size_t region = std::min<size_t>(size_t{1} << 30, free_bytes / 2) & ~((size_t{2} << 20) - 1);
  char* base = nullptr;
  if (!Ok(cudaMallocManaged(reinterpret_cast<void**>(&base), region), "cudaMallocManaged")) {
    return 1;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  const cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
  const cudaMemLocation host{cudaMemLocationTypeHost, 0};

  std::memset(base, 1, region);  // populated on the host
  std::printf("{\"gpu\":\"%s\",\"sms\":%d,\"region_bytes\":%zu,\n \"prefetch\":[", prop.name,
              prop.multiProcessorCount, region);
  const size_t chunks[] = {size_t{64} << 10, size_t{2} << 20, size_t{32} << 20, region};
  bool first = true;
  for (size_t chunk : chunks) {
    const size_t total = std::min(region, chunk * 2048);
    const double h2d = TimePrefetch(base, total, chunk, gpu, stream);
    const double d2h = TimePrefetch(base, total, chunk, host, stream);
    std::printf("%s\n  {\"chunk_bytes\":%zu,\"bytes\":%zu,\"h2d_gbps\":%.3f,\"d2h_gbps\":%.3f,"
                "\"h2d_us_per_call\":%.2f,\"d2h_us_per_call\":%.2f}",
                first ? "" : ",", chunk, total, total / h2d / 1e9, total / d2h / 1e9,
                h2d * 1e6 / (total / chunk), d2h * 1e6 / (total / chunk));
    first = false;
  }
  std::printf("],\n");

  // Demand paging: every page of the host-resident region touched once by a
  // kernel, all SMs at once.
  std::memset(base, 2, region);
  const size_t pages = region / 4096;
  const uint64_t address = reinterpret_cast<uint64_t>(base);
  auto start = Clock::now();
  Replay({DeviceRange{address, 0}}, {pages}, prop.multiProcessorCount, 1, stream);
  const double paging = Seconds(start);

  // The same pages again, now resident: what one access costs the replay
  // kernel with no compute and no fault (its floor per access per SM).
  // One issuer per SM, then eight (DeviceConfig::warps_per_sm).
  const std::vector<KernelProgress> resident =
      Replay({DeviceRange{address, 0}}, {pages}, prop.multiProcessorCount, 1, stream);
  const double resident_ns = double(resident[0].end_ns - resident[0].begin_ns);
  const std::vector<KernelProgress> resident_8 =
      Replay({DeviceRange{address, 0}}, {pages}, prop.multiProcessorCount * 8, 8, stream);
  const double resident_8_ns = double(resident_8[0].end_ns - resident_8[0].begin_ns);

  // What a whole grid costs per kernel beyond the launch gap: 1000 kernels
  // back to back, each with eight issuers per SM taking one resident page
  // each and no compute. Their duration is the grid's start-up and wind-down
  // plus one access; begin to begin, everything a kernel costs but compute.
  const size_t grid = size_t(prop.multiProcessorCount) * 8;
  std::vector<DeviceRange> grid_ranges;
  for (size_t k = 0; k < 1000; ++k) {
    grid_ranges.push_back(DeviceRange{address + (k % (pages / grid)) * grid * 4096, 0});
  }
  const std::vector<KernelProgress> full_grid =
      Replay(grid_ranges, std::vector<uint64_t>(1000, grid), unsigned(grid), 8, stream);
  double grid_duration = 0;
  for (const KernelProgress& stamp : full_grid) grid_duration += double(stamp.end_ns - stamp.begin_ns);
  const double grid_period =
      double(full_grid.back().begin_ns - full_grid.front().begin_ns) / double(full_grid.size() - 1);

  // Fault latency: one page in each of 256 host-resident 2 MB blocks,
  // touched one after another by a single thread block, so no two faults
  // overlap.
  std::memset(base, 3, region);
  const size_t probes = std::min<size_t>(256, region / (size_t{2} << 20));
  std::vector<DeviceRange> probe_ranges;
  for (size_t i = 0; i < probes; ++i) {
    probe_ranges.push_back(DeviceRange{address + i * (size_t{2} << 20), i});
  }
  // One range per probe, all in one kernel: ranges are looked up by their
  // first access, so one page each.
  const std::vector<KernelProgress> serial = Replay(probe_ranges, {probes}, 1, 1, stream);
  const double serial_ns = double(serial[0].end_ns - serial[0].begin_ns);

  // Launch overhead: 1000 empty kernels back to back; the gap between one
  // kernel's end and the next one's begin, on the GPU's clock.
  const std::vector<KernelProgress> empty =
      Replay({}, std::vector<uint64_t>(1000, 0), 1, 1, stream);
  double gaps = 0;
  for (size_t k = 1; k < empty.size(); ++k) gaps += double(empty[k].begin_ns - empty[k - 1].end_ns);

  std::printf(" \"demand_paging\":{\"bytes\":%zu,\"seconds\":%.6f,\"gbps\":%.3f},\n", region,
              paging, region / paging / 1e9);
  std::printf(" \"resident_access\":{\"accesses\":%zu,\"sms\":%d,\"ns_per_access_per_sm\":%.1f,"
              "\"ns_per_access_per_sm_8_warps\":%.1f},\n",
              pages, prop.multiProcessorCount,
              resident_ns * prop.multiProcessorCount / double(pages),
              resident_8_ns * prop.multiProcessorCount / double(pages));
  std::printf(" \"serial_fault\":{\"faults\":%zu,\"us_per_fault\":%.2f},\n", probes,
              serial_ns / 1e3 / double(probes));
  std::printf(" \"launch_gap\":{\"kernels\":%zu,\"us_per_gap\":%.2f},\n", empty.size(),
              gaps / 1e3 / double(empty.size() - 1));
  std::printf(" \"full_grid_kernel\":{\"kernels\":%zu,\"issuers\":%zu,\"us_duration\":%.2f,"
              "\"us_period\":%.2f},\n",
              full_grid.size(), grid, grid_duration / 1e3 / double(full_grid.size()),
              grid_period / 1e3);

  // Under real oversubscription: a balloon leaves half the region free, the
  // first half fills it, and then every page of the second half is touched
  // by all SMs (each block's arrival needs an eviction), and the first half
  // is prefetched back in 2 MiB calls (each one evicting too).
  TimePrefetch(base, region, region, host, stream);
  const size_t half = region / 2;
  const size_t half_blocks = half / (size_t{2} << 20);
  double evicting_paging = 0, evicting_prefetch = 0;
  {
    absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
        umlab::cuda::GpuBalloon::Inflate(half);
    if (Failed(balloon.status())) return 1;
    Replay({DeviceRange{address, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    const std::vector<KernelProgress> second =
        Replay({DeviceRange{address + half, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    evicting_paging = double(second[0].end_ns - second[0].begin_ns);
    evicting_prefetch = TimePrefetch(base, half, size_t{2} << 20, gpu, stream);
  }
  std::printf(" \"evicting_paging\":{\"bytes\":%zu,\"gbps\":%.3f,\"us_per_block\":%.1f},\n", half,
              double(half) / evicting_paging, evicting_paging / 1e3 / double(half_blocks));
  std::printf(" \"evicting_prefetch\":{\"bytes\":%zu,\"gbps\":%.3f,\"us_per_block\":%.1f},\n", half,
              double(half) / evicting_prefetch / 1e9, evicting_prefetch * 1e6 / double(half_blocks));

  // What a policy's calls cost the driver under real oversubscription, per
  // 2 MiB call (docs/devices.md, "A policy's calls"). Everything starts on
  // the host or untouched, and a balloon leaves room for half the region:
  //   "populate_free": never-touched memory prefetched to the GPU (the
  //     driver zero-fills it) while there is room: it fills the room;
  //   "prefetch_evicting": host data prefetched in, each arrival making the
  //     driver evict a block of the above (written back) first;
  //   "populate_evicting": never-touched memory prefetched in, each arrival
  //     evicting a block of host data the same way.
  // What moved is read from the time: a copy of 2 MiB each way takes about
  // 170 us at the link's speeds above.
  TimePrefetch(base, region, region, host, stream);
  {
    char* fresh = nullptr;
    char* more = nullptr;
    if (!Ok(cudaMallocManaged(reinterpret_cast<void**>(&fresh), half), "cudaMallocManaged") ||
        !Ok(cudaMallocManaged(reinterpret_cast<void**>(&more), half), "cudaMallocManaged")) {
      return 1;
    }
    double populate_free = 0, prefetch_evicting = 0, populate_evicting = 0;
    size_t free_after_fill = 0;
    {
      absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
          umlab::cuda::GpuBalloon::Inflate(half);
      if (Failed(balloon.status())) return 1;
      populate_free = TimePrefetch(fresh, half, size_t{2} << 20, gpu, stream);
      size_t total_after_fill = 0;
      cudaMemGetInfo(&free_after_fill, &total_after_fill);
      prefetch_evicting = TimePrefetch(base, half, size_t{2} << 20, gpu, stream);
      populate_evicting = TimePrefetch(more, half, size_t{2} << 20, gpu, stream);
    }
    // The same prefetch of host data, by what its arrivals evict, and one
    // call at a time: whether the driver's cost beyond the copies depends
    // on the victims' history or on calls queueing behind each other.
    //   "written": blocks that came from the host and a kernel wrote;
    //   "read": blocks that came from the host and were only read;
    //   "isolated": blocks a prefetch brought from the host (as "read",
    //     untouched), but each call waited for before the next is made.
    auto reset = [&] {
      for (char* range : {base, fresh, more}) {
        TimePrefetch(range, range == base ? region : half, range == base ? region : half, host,
                     stream);
      }
    };
    auto evicting_by = [&](bool write) -> double {
      reset();
      std::memset(more, 4, half);  // host data
      absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
          umlab::cuda::GpuBalloon::Inflate(half);
      if (Failed(balloon.status())) return -1;
      Replay({DeviceRange{reinterpret_cast<uint64_t>(more) | (write ? 1 : 0), 0}}, {half / 4096},
             prop.multiProcessorCount, 1, stream);
      return TimePrefetch(base, half, size_t{2} << 20, gpu, stream);
    };
    const double prefetch_evicting_written = evicting_by(true);
    const double prefetch_evicting_read = evicting_by(false);
    double prefetch_evicting_isolated = 0;
    {
      reset();
      absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
          umlab::cuda::GpuBalloon::Inflate(half);
      if (Failed(balloon.status())) return 1;
      TimePrefetch(fresh, half, size_t{2} << 20, gpu, stream);
      for (size_t offset = 0; offset < half; offset += size_t{2} << 20) {
        prefetch_evicting_isolated += TimePrefetch(base + offset, size_t{2} << 20,
                                                   size_t{2} << 20, gpu, stream);
      }
    }
    if (prefetch_evicting_written < 0 || prefetch_evicting_read < 0) return 1;
    std::printf(" \"policy_calls\":{\"calls\":%zu,\"free_bytes_when_full\":%zu,"
                "\"populate_free_us_per_call\":%.1f,\"prefetch_evicting_us_per_call\":%.1f,"
                "\"populate_evicting_us_per_call\":%.1f,"
                "\"prefetch_evicting_written_us_per_call\":%.1f,"
                "\"prefetch_evicting_read_us_per_call\":%.1f,"
                "\"prefetch_evicting_isolated_us_per_call\":%.1f},\n",
                half_blocks, free_after_fill, populate_free * 1e6 / double(half_blocks),
                prefetch_evicting * 1e6 / double(half_blocks),
                populate_evicting * 1e6 / double(half_blocks),
                prefetch_evicting_written * 1e6 / double(half_blocks),
                prefetch_evicting_read * 1e6 / double(half_blocks),
                prefetch_evicting_isolated * 1e6 / double(half_blocks));
    cudaFree(more);
    cudaFree(fresh);
  }

  // What DeepUM's invalidation can do on this driver: the first half is made
  // resident under a balloon that leaves only it room, then let go of in
  // 2 MiB spans one of three ways, and the second half is touched, which
  // needs the first half's frames. "write_back": prefetched to the host
  // (the copy a pre-eviction makes); "discard": cudaMemDiscardBatchAsync
  // alone; "discard_to_host": cudaMemDiscardAndPrefetchBatchAsync to the
  // host. Three more let go of part of each block, as DeepUM's pre-eviction
  // does when some of a victim's pages are garbage: "discard_half_write_back"
  // discards each block's first 1 MiB and then prefetches its second to the
  // host (the cuda backend's eviction with drops: one discard batch, then
  // the prefetches); "discard_half" and "discard_odd_pages" only discard
  // (the first 1 MiB; every odd 4 KiB page), leaving the driver to evict
  // the rest when the second half pages in. CUPTI's records say what moved:
  // the bytes written back while letting go, and the bytes the driver
  // evicted to page the second half in (none where letting go gave the
  // frames back).
  cudaFree(base);  // one region at a time
  base = nullptr;
  // CUPTI's unified-memory records cover only managed memory allocated
  // after they are enabled, and slow paging down (about 2.7x on an H200),
  // so the probe has a region of its own, allocated after CUPTI starts.
  absl::StatusOr<std::unique_ptr<umlab::cuda::CuptiFaultStream>> records =
      umlab::cuda::CuptiFaultStream::Start(device);
  if (Failed(records.status())) return 1;
  char* probe = nullptr;
  if (!Ok(cudaMallocManaged(reinterpret_cast<void**>(&probe), region), "cudaMallocManaged")) {
    return 1;
  }
  const uint64_t probe_address = reinterpret_cast<uint64_t>(probe);
  // Device-to-host bytes recorded since the last call, by whether the
  // driver evicted them or was asked to move them.
  struct Moved {
    uint64_t evicted = 0, asked = 0;
    uint64_t to_device = 0;  // host-to-device, any cause
  };
  auto moved_since = [&] {
    cudaDeviceSynchronize();
    // Records reach CUPTI up to about 0.2 s late (docs/cuda.md).
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    (*records)->Flush(/*forced=*/true);
    std::vector<umlab::cuda::UnifiedMemoryRecord> batch;
    (*records)->Drain(batch);
    Moved moved;
    for (const umlab::cuda::UnifiedMemoryRecord& record : batch) {
      if (record.kind == umlab::cuda::UnifiedMemoryRecord::Kind::kBytesHostToDevice) {
        moved.to_device += record.value;
      }
      if (record.kind != umlab::cuda::UnifiedMemoryRecord::Kind::kBytesDeviceToHost) continue;
      (record.cause == umlab::cuda::UnifiedMemoryRecord::Cause::kEviction ? moved.evicted
                                                                          : moved.asked) +=
          record.value;
    }
    return moved;
  };
  std::printf(" \"letting_go\":{\"bytes\":%zu", half);
  const char* ways[] = {"write_back",   "discard",           "discard_to_host",
                        "discard_half_write_back", "discard_half", "discard_odd_pages"};
  constexpr size_t kHalfBlock = size_t{1} << 20;
  for (int way = 0; way < 6; ++way) {
    TimePrefetch(probe, region, region, host, stream);
    absl::StatusOr<std::unique_ptr<umlab::cuda::GpuBalloon>> balloon =
        umlab::cuda::GpuBalloon::Inflate(half);
    if (Failed(balloon.status())) return 1;
    Replay({DeviceRange{probe_address, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    moved_since();
    std::vector<void*> spans;
    std::vector<size_t> sizes;
    for (size_t offset = 0; offset < half; offset += size_t{2} << 20) {
      spans.push_back(probe + offset);
      sizes.push_back(size_t{2} << 20);
    }
    const auto let_go = Clock::now();
    if (way == 0) {
      for (size_t i = 0; i < spans.size(); ++i) {
        Ok(cudaMemPrefetchAsync(spans[i], sizes[i], host, 0, stream), "cudaMemPrefetchAsync");
      }
    } else if (way == 1) {
      Ok(cudaMemDiscardBatchAsync(spans.data(), sizes.data(), spans.size(), 0, stream),
         "cudaMemDiscardBatchAsync");
    } else if (way >= 3) {
      std::vector<void*> garbage;
      std::vector<size_t> garbage_sizes;
      for (void* block : spans) {
        char* block_start = static_cast<char*>(block);
        if (way == 5) {
          for (size_t page = 4096; page < (size_t{2} << 20); page += 8192) {
            garbage.push_back(block_start + page);
            garbage_sizes.push_back(4096);
          }
        } else {
          garbage.push_back(block_start);
          garbage_sizes.push_back(kHalfBlock);
        }
      }
      Ok(cudaMemDiscardBatchAsync(garbage.data(), garbage_sizes.data(), garbage.size(), 0,
                                  stream),
         "cudaMemDiscardBatchAsync");
      if (way == 3) {
        for (void* block : spans) {
          Ok(cudaMemPrefetchAsync(static_cast<char*>(block) + kHalfBlock, kHalfBlock, host, 0,
                                  stream),
             "cudaMemPrefetchAsync");
        }
      }
    } else {
      cudaMemLocation to_host = host;
      size_t first_span = 0;
      Ok(cudaMemDiscardAndPrefetchBatchAsync(spans.data(), sizes.data(), spans.size(), &to_host,
                                             &first_span, 1, 0, stream),
         "cudaMemDiscardAndPrefetchBatchAsync");
    }
    cudaStreamSynchronize(stream);
    const double let_go_seconds = Seconds(let_go);
    const Moved letting_go = moved_since();
    const std::vector<KernelProgress> second =
        Replay({DeviceRange{probe_address + half, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    const double then_paging = double(second[0].end_ns - second[0].begin_ns);
    const Moved paging_in = moved_since();
    std::printf(",\n  \"%s\":{\"us_per_block\":%.1f,\"written_back_bytes\":%llu,"
                "\"then_evicted_bytes\":%llu,\"then_paging_us_per_block\":%.1f}",
                ways[way], let_go_seconds * 1e6 / double(half_blocks),
                static_cast<unsigned long long>(letting_go.asked + letting_go.evicted),
                static_cast<unsigned long long>(paging_in.evicted + paging_in.asked),
                then_paging / 1e3 / double(half_blocks));
  }
  std::printf("}");

  // Whether a discard reaches the copy the host holds: DeepUM's
  // invalidation often comes after the driver has written the block back.
  // The first half is made resident and written back (prefetched to the
  // host), then discarded there not at all ("none"), in its blocks' first
  // halves ("half") or whole ("whole"), and read again on the GPU: CUPTI's
  // host-to-device bytes say how much still had to be copied.
  std::printf(",\n \"discard_on_host\":{\"bytes\":%zu", half);
  const char* amounts[] = {"none", "half", "whole"};
  for (int amount = 0; amount < 3; ++amount) {
    TimePrefetch(probe, region, region, host, stream);
    Replay({DeviceRange{probe_address, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    moved_since();  // what came before
    for (size_t offset = 0; offset < half; offset += size_t{2} << 20) {
      Ok(cudaMemPrefetchAsync(probe + offset, size_t{2} << 20, host, 0, stream),
         "cudaMemPrefetchAsync");
    }
    cudaStreamSynchronize(stream);
    std::vector<void*> spans;
    std::vector<size_t> sizes;
    for (size_t offset = 0; amount > 0 && offset < half; offset += size_t{2} << 20) {
      spans.push_back(probe + offset);
      sizes.push_back(amount == 1 ? kHalfBlock : size_t{2} << 20);
    }
    if (!spans.empty()) {
      Ok(cudaMemDiscardBatchAsync(spans.data(), sizes.data(), spans.size(), 0, stream),
         "cudaMemDiscardBatchAsync");
    }
    cudaStreamSynchronize(stream);
    const Moved written_back = moved_since();
    Replay({DeviceRange{probe_address, 0}}, {half / 4096}, prop.multiProcessorCount, 1, stream);
    const Moved read_again = moved_since();
    std::printf(",\n  \"%s\":{\"written_back_bytes\":%llu,\"copied_back_bytes\":%llu}",
                amounts[amount],
                static_cast<unsigned long long>(written_back.asked + written_back.evicted),
                static_cast<unsigned long long>(read_again.to_device));
  }
  std::printf("}}\n");
  records->reset();
  cudaFree(probe);
  const bool ok = Ok(cudaGetLastError(), "calibration");
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
