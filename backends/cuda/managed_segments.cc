#include "backends/cuda/managed_segments.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "core/byte_size.h"

namespace umlab::cuda {

ManagedSegments::~ManagedSegments() {
  for (const auto& [start, segment] : by_program_) {
    cudaFree(reinterpret_cast<void*>(segment.device_start));
  }
}

absl::Status ManagedSegments::Reserve(uint64_t program_address, uint64_t size) {
  if (size == 0) return absl::OkStatus();
  void* pointer = nullptr;
  const cudaError_t error = cudaMallocManaged(&pointer, size, cudaMemAttachGlobal);
  if (error != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cudaMallocManaged(%s) failed: %s", FormatBytes(size), cudaGetErrorString(error)));
  }
  const uint64_t device = reinterpret_cast<uint64_t>(pointer);
  by_program_[program_address] = Segment{program_address, device, size};
  by_device_[device] = program_address;
  reserved_bytes_ += size;
  return absl::OkStatus();
}

const ManagedSegments::Segment* ManagedSegments::FindByProgram(uint64_t program_address) const {
  auto it = by_program_.upper_bound(program_address);
  if (it == by_program_.begin()) return nullptr;
  --it;
  const Segment& segment = it->second;
  if (program_address >= segment.program_start + segment.size) return nullptr;
  return &segment;
}

uint64_t ManagedSegments::ToDevice(uint64_t program_address) const {
  const Segment* segment = FindByProgram(program_address);
  if (segment == nullptr) return 0;
  return segment->device_start + (program_address - segment->program_start);
}

std::optional<uint64_t> ManagedSegments::ToProgram(uint64_t device_address) const {
  auto it = by_device_.upper_bound(device_address);
  if (it == by_device_.begin()) return std::nullopt;
  --it;
  const Segment& segment = by_program_.at(it->second);
  if (device_address >= segment.device_start + segment.size) return std::nullopt;
  return segment.program_start + (device_address - segment.device_start);
}

}  // namespace umlab::cuda
