// umlab_cuda_probe: lists the visible GPUs with their free memory and
// whether they support the unified-memory features the cuda backend needs.
// Exit status 0 if at least one usable GPU is present, 1 otherwise.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n",
                error == cudaSuccess ? "none visible" : cudaGetErrorString(error));
    return 1;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, device);
    size_t free_bytes = 0, total_bytes = 0;
    cudaSetDevice(device);
    cudaMemGetInfo(&free_bytes, &total_bytes);
    int concurrent_managed = 0;
    cudaDeviceGetAttribute(&concurrent_managed, cudaDevAttrConcurrentManagedAccess, device);
    std::printf("gpu %d: %s, %d SMs, %.1f GiB free of %.1f GiB, concurrent managed access %s\n",
                device, prop.name, prop.multiProcessorCount, free_bytes / 1073741824.0,
                total_bytes / 1073741824.0, concurrent_managed ? "yes" : "no");
  }
  return 0;
}
