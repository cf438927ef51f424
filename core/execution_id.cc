#include "core/execution_id.h"

namespace umlab {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void Mix(uint64_t& hash, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= kFnvPrime;
  }
}

void MixWord(uint64_t& hash, uint64_t word) {
  // Byte by byte from the low end, so the hash does not depend on the
  // machine's byte order.
  for (int i = 0; i < 8; ++i) {
    const uint8_t byte = static_cast<uint8_t>(word >> (8 * i));
    Mix(hash, &byte, 1);
  }
}

}  // namespace

uint64_t HashKernelLaunch(const KernelLaunch& launch) {
  uint64_t hash = kFnvOffset;
  // Each variable-length part is preceded by its length, so that moving a
  // byte from the name into the arguments changes the hash.
  MixWord(hash, launch.kernel_name.size());
  Mix(hash, launch.kernel_name.data(), launch.kernel_name.size());
  for (uint32_t d : launch.grid) MixWord(hash, d);
  for (uint32_t d : launch.block) MixWord(hash, d);
  MixWord(hash, launch.shared_bytes);
  MixWord(hash, launch.argument_bytes.size());
  Mix(hash, launch.argument_bytes.data(), launch.argument_bytes.size());
  return hash;
}

uint32_t ExecutionIdTable::IdOf(const KernelLaunch& launch) {
  const auto [it, inserted] =
      ids_.try_emplace(HashKernelLaunch(launch), static_cast<uint32_t>(ids_.size() + 1));
  return it->second;
}

}  // namespace umlab
