// umlab_remote_probe: what the device's own accesses to host memory cost on
// the GPU at hand, for the remote-mapping model (LinkConfig remote_*,
// PolicyContext::MapRemote) and for MemFerry's direct host access. Prints
// JSON with, for each of three placements of the data:
//   - hbm: cudaMalloc'd device memory (the baseline);
//   - managed_remote: managed memory advised PreferredLocation=host and
//     AccessedBy=GPU and prefetched to the host: what the cuda backend's
//     MapRemote does;
//   - pinned_mapped: cudaHostAlloc(Mapped) host memory, as MemFerry's DHA;
// the streaming read and write bandwidth of a whole-GPU kernel, the round
// trip of one dependent access (a pointer chase), and the time of three
// layer-shaped kernels whose parameter operand lives there: a tiled GEMM
// (a linear layer: each weight tile is read once per row tile of the
// input), a layer norm's scale and shift (read once per row, tiny), and an
// embedding gather (only the rows looked up).
//
// Then cuBLAS's own half-precision GEMMs (tensor cores, as the zoo's
// linear layers assume) with the weight in each placement, forward
// (x * W) and data-gradient (dy * W^T), over the rows of x: how many passes
// over the weight reach the link.
//
// Last, gathers of random rows of 32 bytes to 4 KiB out of a 512 MiB table in
// each placement (an embedding bag's lookups, DLRM's 256-byte rows among
// them): what small scattered remote reads cost per byte, next to the
// streaming rate.
//
// It allocates at most 512 MiB of each kind.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_call_check.h"

namespace {

constexpr umlab::cuda::CudaCallCheck Ok("umlab_remote_probe");

__global__ void StreamRead(const float4* data, size_t count, float* sink) {
  float4 sum = make_float4(0, 0, 0, 0);
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    const float4 v = data[i];
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
    sum.w += v.w;
  }
  if (sum.x + sum.y + sum.z + sum.w == 12345.0f) *sink = sum.x;  // keeps the loads
}

__global__ void StreamWrite(float4* data, size_t count) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += size_t{gridDim.x} * blockDim.x) {
    data[i] = make_float4(1, 2, 3, static_cast<float>(i));
  }
}

// One thread follows `steps` links of a chain laid out one per 4 KiB page.
__global__ void Chase(const uint64_t* chain, int steps, uint64_t* sink) {
  uint64_t at = 0;
  for (int i = 0; i < steps; ++i) at = chain[at];
  *sink = at;
}

constexpr int kTile = 32;

// C[M x N] = A[M x K] * B[K x N], row-major fp32, 32 x 32 shared-memory
// tiles: every block reads its K x 32 strip of B, so B is read M / 32 times
// in all (what reaches the link depends on what L2 keeps).
__global__ void TiledGemm(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float tile_a[kTile][kTile];
  __shared__ float tile_b[kTile][kTile];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float sum = 0;
  for (int t = 0; t < k; t += kTile) {
    tile_a[threadIdx.y][threadIdx.x] = a[size_t(row) * k + t + threadIdx.x];
    tile_b[threadIdx.y][threadIdx.x] = b[size_t(t + threadIdx.y) * n + col];
    __syncthreads();
    for (int i = 0; i < kTile; ++i) sum += tile_a[threadIdx.y][i] * tile_b[i][threadIdx.x];
    __syncthreads();
  }
  c[size_t(row) * n + col] = sum;
}

// y = x * gamma + beta per row of width `width` (a layer norm's affine part;
// the parameters are what live remotely).
__global__ void RowAffine(const float* x, const float* gamma, const float* beta, float* y,
                          int rows, int width) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < size_t(rows) * width;
       i += size_t{gridDim.x} * blockDim.x) {
    const int j = static_cast<int>(i % width);
    y[i] = x[i] * gamma[j] + beta[j];
  }
}

// out[r] = table[ids[r]] for rows of `width` floats (an embedding lookup).
__global__ void Gather(const float* table, const int* ids, float* out, int rows, int width) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < size_t(rows) * width;
       i += size_t{gridDim.x} * blockDim.x) {
    const size_t r = i / width;
    out[i] = table[size_t(ids[r]) * width + i % width];
  }
}

enum class Placement { kHbm, kManagedRemote, kPinnedMapped };
const char* PlacementName(Placement p) {
  switch (p) {
    case Placement::kHbm: return "hbm";
    case Placement::kManagedRemote: return "managed_remote";
    case Placement::kPinnedMapped: return "pinned_mapped";
  }
  return "?";
}

// A zeroed buffer of `bytes` in `placement`; null on failure.
void* Allocate(Placement placement, size_t bytes, int device) {
  void* p = nullptr;
  switch (placement) {
    case Placement::kHbm:
      if (!Ok(cudaMalloc(&p, bytes), "cudaMalloc")) return nullptr;
      cudaMemset(p, 0, bytes);
      break;
    case Placement::kManagedRemote: {
      if (!Ok(cudaMallocManaged(&p, bytes), "cudaMallocManaged")) return nullptr;
      std::memset(p, 0, bytes);
      const cudaMemLocation host{cudaMemLocationTypeHost, 0};
      const cudaMemLocation gpu{cudaMemLocationTypeDevice, device};
      if (!Ok(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host), "advise") ||
          !Ok(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, gpu), "advise") ||
          !Ok(cudaMemPrefetchAsync(p, bytes, host, 0, 0), "prefetch")) {
        return nullptr;
      }
      break;
    }
    case Placement::kPinnedMapped: {
      if (!Ok(cudaHostAlloc(&p, bytes, cudaHostAllocMapped), "cudaHostAlloc")) return nullptr;
      std::memset(p, 0, bytes);
      void* device_view = nullptr;
      cudaHostGetDevicePointer(&device_view, p, 0);
      return device_view;  // same address with UVA
    }
  }
  cudaDeviceSynchronize();
  return p;
}

void Release(Placement placement, void* p) {
  if (p == nullptr) return;
  if (placement == Placement::kPinnedMapped) {
    cudaFreeHost(p);
  } else {
    cudaFree(p);
  }
}

// Milliseconds of the best of `repeats` runs of `launch` (after one warm-up).
template <typename Launch>
float BestMs(Launch launch, int repeats = 5) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  launch();
  cudaDeviceSynchronize();
  float best = 1e30f;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

// cuBLAS half GEMM on row-major arrays: y[m x n] = x[m x k] * w (w is
// k x n, or with `transposed` n x k used as its transpose).
void HalfGemm(cublasHandle_t handle, const __half* x, const __half* w, __half* y, int m, int n,
              int k, bool transposed) {
  const float one = 1, zero = 0;
  // Column-major view: y^T = w^T * x^T.
  cublasGemmEx(handle, transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w,
               CUDA_R_16F, transposed ? k : n, x, CUDA_R_16F, k, &zero, y, CUDA_R_16F, n,
               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // namespace

int main() {
  const int device = 0;
  if (!Ok(cudaSetDevice(device), "cudaSetDevice")) return 1;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, device);
  const int blocks = prop.multiProcessorCount * 8;
  const size_t stream_bytes = size_t{256} << 20;
  float* sink = nullptr;
  uint64_t* chase_sink = nullptr;
  cudaMalloc(&sink, sizeof(float));
  cudaMalloc(&chase_sink, sizeof(uint64_t));

  // Layer shapes: GPT-2 small's MLP up-projection, a layer norm over its
  // hidden size, and its token embedding.
  const int k = 768, n = 3072, width = 768, vocab = 50257;
  const int row_counts[] = {256, 1024, 4096};
  float *a = nullptr, *c = nullptr, *x = nullptr, *y = nullptr;
  int* ids = nullptr;
  const int max_rows = 4096;
  cudaMalloc(&a, size_t(max_rows) * k * sizeof(float));
  cudaMalloc(&c, size_t(max_rows) * n * sizeof(float));
  cudaMalloc(&x, size_t(max_rows) * width * sizeof(float));
  cudaMalloc(&y, size_t(max_rows) * width * sizeof(float));
  cudaMalloc(&ids, max_rows * sizeof(int));
  std::vector<int> host_ids(max_rows);
  for (int i = 0; i < max_rows; ++i) host_ids[i] = static_cast<int>((i * 7919ull) % vocab);
  cudaMemcpy(ids, host_ids.data(), max_rows * sizeof(int), cudaMemcpyHostToDevice);

  std::printf("{\"gpu\":\"%s\",\"sms\":%d,\"placements\":[", prop.name, prop.multiProcessorCount);
  bool first = true;
  for (Placement placement :
       {Placement::kHbm, Placement::kManagedRemote, Placement::kPinnedMapped}) {
    void* stream_buffer = Allocate(placement, stream_bytes, device);
    const size_t chain_pages = 4096;
    auto* chain = static_cast<uint64_t*>(Allocate(placement, chain_pages * 4096, device));
    auto* weight = static_cast<float*>(Allocate(placement, size_t(k) * n * sizeof(float), device));
    auto* gamma = static_cast<float*>(Allocate(placement, 2 * width * sizeof(float), device));
    auto* table =
        static_cast<float*>(Allocate(placement, size_t(vocab) * width * sizeof(float), device));
    if (stream_buffer == nullptr || chain == nullptr || weight == nullptr || gamma == nullptr ||
        table == nullptr) {
      return 1;
    }
    // The chain visits the pages in a scattered order, one link per page.
    std::vector<uint64_t> links(chain_pages * 512, 0);
    for (size_t p = 0; p < chain_pages; ++p) {
      links[p * 512] = ((p * 2654435761ull + 1) % chain_pages) * 512;
    }
    cudaMemcpy(chain, links.data(), links.size() * sizeof(uint64_t), cudaMemcpyDefault);
    cudaDeviceSynchronize();

    const size_t count = stream_bytes / sizeof(float4);
    const float read_ms = BestMs(
        [&] { StreamRead<<<blocks, 256>>>(static_cast<const float4*>(stream_buffer), count, sink); });
    const float write_ms =
        BestMs([&] { StreamWrite<<<blocks, 256>>>(static_cast<float4*>(stream_buffer), count); });
    const int steps = 2000;
    const float chase_ms = BestMs([&] { Chase<<<1, 1>>>(chain, steps, chase_sink); }, 3);

    std::printf("%s\n {\"placement\":\"%s\",\"read_gbps\":%.2f,\"write_gbps\":%.2f,"
                "\"dependent_access_ns\":%.0f,\"layers\":[",
                first ? "" : ",", PlacementName(placement), stream_bytes / read_ms / 1e6,
                stream_bytes / write_ms / 1e6, chase_ms * 1e6 / steps);
    first = false;
    bool first_layer = true;
    for (int rows : row_counts) {
      const dim3 grid(n / kTile, rows / kTile), block(kTile, kTile);
      const float gemm_ms = BestMs([&] { TiledGemm<<<grid, block>>>(a, weight, c, rows, n, k); });
      const float norm_ms =
          BestMs([&] { RowAffine<<<blocks, 256>>>(x, gamma, gamma + width, y, rows, width); });
      const float gather_ms =
          BestMs([&] { Gather<<<blocks, 256>>>(table, ids, y, rows, width); });
      std::printf("%s\n   {\"rows\":%d,\"gemm_us\":%.1f,\"layer_norm_us\":%.1f,"
                  "\"embedding_us\":%.1f}",
                  first_layer ? "" : ",", rows, gemm_ms * 1e3, norm_ms * 1e3, gather_ms * 1e3);
      first_layer = false;
    }
    std::printf("]}");
    Release(placement, stream_buffer);
    Release(placement, chain);
    Release(placement, weight);
    Release(placement, gamma);
    Release(placement, table);
    if (!Ok(cudaGetLastError(), "a probe kernel")) return 1;
  }
  std::printf("],\n \"weight_bytes\":%zu,\"stream_bytes\":%zu,\n \"cublas_half\":[",
              size_t(k) * n * sizeof(float), stream_bytes);
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "umlab_remote_probe: cublasCreate failed\n");
    return 1;
  }
  // (k, n): GPT-2 small's c_fc and a square 4096 layer.
  const int shapes[][2] = {{768, 3072}, {4096, 4096}};
  const int gemm_rows[] = {256, 1024, 4096, 16384};
  __half *hx = nullptr, *hy = nullptr;
  cudaMalloc(&hx, size_t(16384) * 4096 * sizeof(__half));
  cudaMalloc(&hy, size_t(16384) * 4096 * sizeof(__half));
  bool first_gemm = true;
  for (const auto& shape : shapes) {
    const int gk = shape[0], gn = shape[1];
    const size_t weight_bytes = size_t(gk) * gn * sizeof(__half);
    for (Placement placement :
         {Placement::kHbm, Placement::kManagedRemote, Placement::kPinnedMapped}) {
      auto* w = static_cast<__half*>(Allocate(placement, weight_bytes, device));
      if (w == nullptr) return 1;
      for (int rows : gemm_rows) {
        const float forward_ms = BestMs([&] { HalfGemm(handle, hx, w, hy, rows, gn, gk, false); });
        const float dgrad_ms = BestMs([&] { HalfGemm(handle, hy, w, hx, rows, gk, gn, true); });
        std::printf("%s\n  {\"k\":%d,\"n\":%d,\"rows\":%d,\"placement\":\"%s\","
                    "\"weight_bytes\":%zu,\"forward_us\":%.1f,\"dgrad_us\":%.1f}",
                    first_gemm ? "" : ",", gk, gn, rows, PlacementName(placement), weight_bytes,
                    forward_ms * 1e3, dgrad_ms * 1e3);
        first_gemm = false;
      }
      Release(placement, w);
    }
  }
  std::printf("],\n \"gathers\":[");
  if (!Ok(cudaGetLastError(), "a cuBLAS GEMM")) return 1;
  {
    const size_t table_bytes = size_t{512} << 20;
    const int lookups = 65536;
    const int row_sizes[] = {32, 64, 128, 256, 512, 1024, 4096};
    int* lookup_ids = nullptr;
    float* gathered = nullptr;
    cudaMalloc(&lookup_ids, lookups * sizeof(int));
    cudaMalloc(&gathered, size_t(lookups) * 4096);
    std::vector<int> host_lookup(lookups);
    bool first_gather = true;
    for (Placement placement :
         {Placement::kHbm, Placement::kManagedRemote, Placement::kPinnedMapped}) {
      auto* table = static_cast<float*>(Allocate(placement, table_bytes, device));
      if (table == nullptr) return 1;
      for (int row_bytes : row_sizes) {
        const size_t table_rows = table_bytes / row_bytes;
        // Scattered rows, each looked up once (a multiplicative hash).
        for (int i = 0; i < lookups; ++i) {
          host_lookup[i] = static_cast<int>((i * 2654435761ull + 12345) % table_rows);
        }
        cudaMemcpy(lookup_ids, host_lookup.data(), lookups * sizeof(int),
                   cudaMemcpyHostToDevice);
        const int row_floats = row_bytes / 4;
        const float gather_ms = BestMs(
            [&] { Gather<<<blocks, 256>>>(table, lookup_ids, gathered, lookups, row_floats); });
        std::printf("%s\n  {\"placement\":\"%s\",\"row_bytes\":%d,\"lookups\":%d,"
                    "\"gather_us\":%.1f,\"gbps\":%.2f}",
                    first_gather ? "" : ",", PlacementName(placement), row_bytes, lookups,
                    gather_ms * 1e3, double(lookups) * row_bytes / gather_ms / 1e6);
        first_gather = false;
      }
      Release(placement, table);
    }
    cudaFree(lookup_ids);
    cudaFree(gathered);
  }
  std::printf("]}\n");
  if (!Ok(cudaGetLastError(), "a gather")) return 1;
  cublasDestroy(handle);
  cudaFree(hx);
  cudaFree(hy);
  cudaFree(a);
  cudaFree(c);
  cudaFree(x);
  cudaFree(y);
  cudaFree(ids);
  cudaFree(sink);
  cudaFree(chase_sink);
  return 0;
}
