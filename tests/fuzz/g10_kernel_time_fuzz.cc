// Fuzzes the parser of G10's per-kernel files (`cudnn<B>{,InputPF,PF}.txt`
// in ms, `cudnn<B>Workspace.txt` in B: ParseG10PerKernelFile,
// workloads/g10/g10_graph.h). Input: one byte choosing the unit, then the text.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "workloads/g10/g10_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string unit = (data[0] & 1) ? "B" : "ms";
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto values = umlab::ParseG10PerKernelFile(text, "fuzz.txt", unit);
  if (!values.ok()) return 0;
  // The loader converts these to ns and bytes; the parser bounds them.
  for (double value : *values) {
    if (!std::isfinite(value) || value < 0 || value > 1e12) std::abort();
  }
  return 0;
}
