// DeepUM's execution ids (DeepUM §4.1): a kernel launch is named by a hash of
// its kernel's name, its launch configuration and its argument values; the
// first launch with a new hash gets the next id, and every later launch with
// the same hash gets the same id again. DeepUM's correlation tables are keyed
// by these ids, so a training iteration that repeats the previous one's
// launches (same kernels, same tensors at the same addresses, as PyTorch's
// caching allocator hands them out) repeats its ids too.
//
// The cuda backend's PyTorch integration names every launch it observes
// this way; programs and traces carry the ids.
#ifndef UMLAB_CORE_EXECUTION_ID_H_
#define UMLAB_CORE_EXECUTION_ID_H_

#include <array>
#include <cstdint>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace umlab {

// What a launch is made of, as the CUDA driver's launch call receives it.
struct KernelLaunch {
  std::string_view kernel_name;  // the mangled name
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
  // The arguments' bytes, packed in parameter order (pointers included:
  // a kernel run on other tensors is another execution).
  absl::Span<const uint8_t> argument_bytes;
};

// A 64-bit FNV-1a hash over every field. Stable across runs and machines.
uint64_t HashKernelLaunch(const KernelLaunch& launch);

// Hash -> execution id, ids from 1 in order of first appearance (0 is "no
// kernel", as in umlab's programs).
class ExecutionIdTable {
 public:
  uint32_t IdOf(const KernelLaunch& launch);
  // Distinct executions seen so far.
  size_t size() const { return ids_.size(); }

 private:
  absl::flat_hash_map<uint64_t, uint32_t> ids_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_EXECUTION_ID_H_
