#include "backends/cuda/gpu_balloon.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/byte_size.h"

namespace umlab::cuda {
namespace {

// Reserved in pieces: one huge cudaMalloc can fail on a fragmented device
// where smaller ones succeed.
constexpr uint64_t kPieceBytes = uint64_t{1} << 30;
// cudaMalloc hands out 2 MiB granules; closer than this is exact.
constexpr uint64_t kGranule = uint64_t{2} << 20;

}  // namespace

absl::StatusOr<uint64_t> GpuFreeBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t error = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (error != cudaSuccess) {
    return absl::InternalError(
        absl::StrFormat("cudaMemGetInfo failed: %s", cudaGetErrorString(error)));
  }
  return free_bytes;
}

absl::StatusOr<std::unique_ptr<GpuBalloon>> GpuBalloon::Inflate(uint64_t leave_free_bytes) {
  std::unique_ptr<GpuBalloon> balloon(new GpuBalloon());
  absl::StatusOr<uint64_t> free_bytes = GpuFreeBytes();
  if (!free_bytes.ok()) return free_bytes.status();
  if (*free_bytes < leave_free_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the capacity (%s) is more than the GPU has free (%s); use a smaller --capacity",
        FormatBytes(leave_free_bytes), FormatBytes(*free_bytes)));
  }
  // The driver's own allocations for the balloon shrink what is free by a
  // little more than asked: measure again after each piece.
  while (*free_bytes > leave_free_bytes + kGranule) {
    const uint64_t piece =
        std::min(kPieceBytes, (*free_bytes - leave_free_bytes) / kGranule * kGranule);
    void* pointer = nullptr;
    const cudaError_t error = cudaMalloc(&pointer, piece);
    if (error != cudaSuccess) {
      cudaGetLastError();  // cudaMalloc's error is not sticky; clear it
      return absl::ResourceExhaustedError(absl::StrFormat(
          "could not reserve device memory for the balloon (%s after %s): %s",
          FormatBytes(piece), FormatBytes(balloon->reserved_bytes_), cudaGetErrorString(error)));
    }
    balloon->pieces_.push_back(pointer);
    balloon->reserved_bytes_ += piece;
    free_bytes = GpuFreeBytes();
    if (!free_bytes.ok()) return free_bytes.status();
  }
  balloon->free_bytes_ = *free_bytes;
  return balloon;
}

GpuBalloon::~GpuBalloon() {
  for (void* piece : pieces_) cudaFree(piece);
}

}  // namespace umlab::cuda
