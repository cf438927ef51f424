// Fuzzes the regression-suite parser (CheckRegressSuite, cli/regress.h): JSON
// syntax, then the suite's structure, members, metric names and tolerances.
// No case is run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cli/regress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<int> cases = umlab::cli::CheckRegressSuite("fuzz.json", text);
  // A usable suite has at least one case.
  if (cases.ok() && *cases < 1) std::abort();
  return 0;
}
