// SplitMix64: a small, fixed, portable pseudo-random sequence, for the
// model's deterministic choices (the same seed gives the same run on every
// machine and compiler, which <random>'s distributions do not promise).
#ifndef UMLAB_CORE_SPLIT_MIX64_H_
#define UMLAB_CORE_SPLIT_MIX64_H_

#include <cstdint>

namespace umlab {

// Advances `state` and returns the next value of its sequence.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace umlab

#endif  // UMLAB_CORE_SPLIT_MIX64_H_
