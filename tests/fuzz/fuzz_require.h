// What fuzz targets assert about an accepted input: a failed requirement
// aborts, which libFuzzer reports as a crash with the input that caused it.
#ifndef UMLAB_TESTS_FUZZ_FUZZ_REQUIRE_H_
#define UMLAB_TESTS_FUZZ_FUZZ_REQUIRE_H_

#include <cmath>
#include <cstdlib>

namespace umlab::fuzz {

inline void Require(bool condition) {
  if (!condition) std::abort();
}

// A bandwidth or rate the models can divide by.
inline bool PositiveRate(double value) { return std::isfinite(value) && value > 0; }

}  // namespace umlab::fuzz

#endif  // UMLAB_TESTS_FUZZ_FUZZ_REQUIRE_H_
