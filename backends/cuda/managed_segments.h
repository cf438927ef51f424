// The program's device segments, backed by CUDA managed memory.
//
// Each range of the program's address space the backend backs (the merged
// segments of a replay plan) becomes one cudaMallocManaged allocation;
// addresses translate both ways between the program's address space and the
// managed pointers. How much may be reserved is the backend's decision.
#ifndef UMLAB_BACKENDS_CUDA_MANAGED_SEGMENTS_H_
#define UMLAB_BACKENDS_CUDA_MANAGED_SEGMENTS_H_

#include <cstdint>
#include <map>
#include <optional>

#include "absl/status/status.h"

namespace umlab::cuda {

class ManagedSegments {
 public:
  ManagedSegments() = default;
  ~ManagedSegments();
  ManagedSegments(const ManagedSegments&) = delete;
  ManagedSegments& operator=(const ManagedSegments&) = delete;

  absl::Status Reserve(uint64_t program_address, uint64_t size);

  // The managed pointer behind a program address; 0 if none.
  uint64_t ToDevice(uint64_t program_address) const;
  // The program address behind a managed pointer.
  std::optional<uint64_t> ToProgram(uint64_t device_address) const;
  uint64_t reserved_bytes() const { return reserved_bytes_; }

 private:
  struct Segment {
    uint64_t program_start;
    uint64_t device_start;
    uint64_t size;
  };
  const Segment* FindByProgram(uint64_t program_address) const;

  uint64_t reserved_bytes_ = 0;
  std::map<uint64_t, Segment> by_program_;    // keyed by program_start
  std::map<uint64_t, uint64_t> by_device_;    // device_start -> program_start
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_MANAGED_SEGMENTS_H_
