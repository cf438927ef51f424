// Measures the costs HUM's copies are made of on a real machine, for the
// sim's device presets and docs/hum.md:
//   - cudaMemcpy from and to pageable (malloc'd) host memory: the plain
//     copies a CUDA program makes (the DMA rate);
//   - a host thread pool copying a malloc'd buffer into managed memory that
//     nobody has touched yet, 2 MiB per task (HUM's staging into the host
//     UM space, first-touch faults included), for 1 to 16 threads;
//   - cudaMemPrefetchAsync of one host-resident 2 MiB chunk at a time,
//     waited for before the next (HUM's migration thread calls the driver's
//     migration function the same way: synchronous, 2 MB at a time).
// Standalone (it is not part of the CMake build, which may have no CUDA;
// CUDA 13's cudaMemPrefetchAsync takes a cudaMemLocation):
//   nvcc -O2 -std=c++17 -o hum_copy_probe bench/hum_copy_probe.cu && ./hum_copy_probe
// Prints one `name value unit` line per figure.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr size_t kChunk = 2u << 20;
constexpr size_t kBytes = 1ull << 30;

void Check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(1);
  }
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The best of `runs` timings of fn(), in seconds.
template <typename Fn>
double Best(int runs, Fn fn) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) best = std::min(best, fn());
  return best;
}

// `threads` threads copy `source` into `destination` 2 MiB at a time, each
// taking the next chunk, as HUM's copy threads do.
double PoolCopy(char* destination, const char* source, size_t bytes, int threads) {
  std::atomic<size_t> next{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t offset; (offset = next.fetch_add(kChunk)) < bytes;) {
        std::memcpy(destination + offset, source + offset, std::min(kChunk, bytes - offset));
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  return Seconds(start);
}

}  // namespace

int main() {
  int device = 0;
  Check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop;
  Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("gpu %s -\n", prop.name);
  std::printf("host_threads %u -\n", std::thread::hardware_concurrency());

  char* host = static_cast<char*>(std::malloc(kBytes));
  char* back = static_cast<char*>(std::malloc(kBytes));
  std::memset(host, 1, kBytes);
  std::memset(back, 0, kBytes);
  char* device_buffer = nullptr;
  Check(cudaMalloc(&device_buffer, kBytes), "cudaMalloc");

  // Plain copies from and to pageable memory.
  const double h2d = Best(3, [&] {
    const auto start = std::chrono::steady_clock::now();
    Check(cudaMemcpy(device_buffer, host, kBytes, cudaMemcpyHostToDevice), "cudaMemcpy h2d");
    return Seconds(start);
  });
  const double d2h = Best(3, [&] {
    const auto start = std::chrono::steady_clock::now();
    Check(cudaMemcpy(back, device_buffer, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy d2h");
    return Seconds(start);
  });
  std::printf("memcpy_pageable_h2d_1GiB %.2f GB/s\n", kBytes / h2d / 1e9);
  std::printf("memcpy_pageable_d2h_1GiB %.2f GB/s\n", kBytes / d2h / 1e9);

  // Staging into untouched managed memory with a pool of threads; a fresh
  // managed buffer per run, so every page is a first touch.
  for (int threads : {1, 2, 4, 8, 16}) {
    const double seconds = Best(2, [&] {
      char* managed = nullptr;
      Check(cudaMallocManaged(&managed, kBytes), "cudaMallocManaged");
      const double s = PoolCopy(managed, host, kBytes, threads);
      Check(cudaFree(managed), "cudaFree");
      return s;
    });
    std::printf("stage_managed_fresh_threads_%d %.2f GB/s\n", threads, kBytes / seconds / 1e9);
  }
  // The same into managed memory the host already touched, and into plain
  // malloc'd memory, to see what the first touch costs.
  for (int threads : {1, 8}) {
    char* managed = nullptr;
    Check(cudaMallocManaged(&managed, kBytes), "cudaMallocManaged");
    std::memset(managed, 0, kBytes);
    const double seconds = Best(2, [&] { return PoolCopy(managed, host, kBytes, threads); });
    Check(cudaFree(managed), "cudaFree");
    std::printf("stage_managed_warm_threads_%d %.2f GB/s\n", threads, kBytes / seconds / 1e9);
    std::memset(back, 0, kBytes);
    const double plain = Best(2, [&] { return PoolCopy(back, host, kBytes, threads); });
    std::printf("memcpy_host_warm_threads_%d %.2f GB/s\n", threads, kBytes / plain / 1e9);
  }

  // The migration thread: one 2 MiB chunk of host-resident managed memory
  // at a time to the device, each waited for.
  {
    char* managed = nullptr;
    Check(cudaMallocManaged(&managed, kBytes), "cudaMallocManaged");
    std::memset(managed, 1, kBytes);
    cudaStream_t stream;
    Check(cudaStreamCreate(&stream), "cudaStreamCreate");
    cudaMemLocation location{};
    location.type = cudaMemLocationTypeDevice;
    location.id = device;
    const size_t chunks = kBytes / kChunk;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < chunks; ++i) {
      Check(cudaMemPrefetchAsync(managed + i * kChunk, kChunk, location, 0, stream),
            "cudaMemPrefetchAsync");
      Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    const double seconds = Seconds(start);
    std::printf("migrate_2MiB_call %.1f us\n", seconds / chunks * 1e6);
    std::printf("migrate_2MiB_rate %.2f GB/s\n", kBytes / seconds / 1e9);
    Check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    Check(cudaFree(managed), "cudaFree");
  }
  Check(cudaFree(device_buffer), "cudaFree");
  std::free(host);
  std::free(back);
  return 0;
}
