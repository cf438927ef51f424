// umlab_cuda_calibrate: measures what the sim's device preset needs on the
// GPU at hand and prints it as JSON: prefetch (migration) bandwidth and
// per-call cost in each direction, and demand-paging throughput and
// per-fault latency. docs/devices.md says how the h200 preset uses them.
//
// It allocates at most 1 GiB of managed memory, and never more than half
// of what the GPU has free.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backends/cuda/touch_kernel.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool Ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "umlab_cuda_calibrate: %s failed: %s\n", what, cudaGetErrorString(error));
  return false;
}

// Moves `total` bytes in calls of `chunk` bytes to `location`; returns the
// seconds it took. The data starts on the other side.
double TimePrefetch(char* base, size_t total, size_t chunk, cudaMemLocation location,
                    cudaStream_t stream) {
  cudaStreamSynchronize(stream);
  const auto start = Clock::now();
  for (size_t offset = 0; offset + chunk <= total; offset += chunk) {
    cudaMemPrefetchAsync(base + offset, chunk, location, 0, stream);
  }
  cudaStreamSynchronize(stream);
  return Seconds(start);
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
  std::vector<uint64_t> list(pages);
  for (size_t i = 0; i < pages; ++i) list[i] = reinterpret_cast<uint64_t>(base) + i * 4096;
  uint64_t* device_list = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&device_list), pages * sizeof(uint64_t));
  cudaMemcpy(device_list, list.data(), pages * sizeof(uint64_t), cudaMemcpyHostToDevice);
  auto start = Clock::now();
  umlab::cuda::LaunchTouchKernel(device_list, pages, prop.multiProcessorCount, 0, stream);
  cudaStreamSynchronize(stream);
  const double paging = Seconds(start);

  // Fault latency: one page in each of 256 host-resident 2 MB blocks,
  // touched one after another by a single thread block, so no two faults
  // overlap.
  std::memset(base, 3, region);
  const size_t probes = std::min<size_t>(256, region / (size_t{2} << 20));
  for (size_t i = 0; i < probes; ++i) list[i] = reinterpret_cast<uint64_t>(base) + i * (size_t{2} << 20);
  cudaMemcpy(device_list, list.data(), probes * sizeof(uint64_t), cudaMemcpyHostToDevice);
  start = Clock::now();
  umlab::cuda::LaunchTouchKernel(device_list, probes, 1, 0, stream);
  cudaStreamSynchronize(stream);
  const double serial = Seconds(start);
  std::printf(" \"demand_paging\":{\"bytes\":%zu,\"seconds\":%.6f,\"gbps\":%.3f},\n", region,
              paging, region / paging / 1e9);
  std::printf(" \"serial_fault\":{\"faults\":%zu,\"us_per_fault\":%.2f}}\n", probes,
              serial * 1e6 / probes);
  const bool ok = Ok(cudaGetLastError(), "calibration");
  cudaFree(device_list);
  cudaFree(base);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
