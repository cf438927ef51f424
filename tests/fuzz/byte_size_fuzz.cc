// Fuzzes the byte-size parser (core/byte_size.h) and --capacity
// (ParseCapacityFrames, cli/runner/experiment.h). Input: one byte choosing the
// footprint's magnitude, then the text.
//
// Besides crashes and undefined behaviour it checks what the parsers
// promise: a plain integer parses to itself (within a double's precision,
// since the parser goes through one), FormatBytes never fails, and an
// accepted capacity is at least one frame.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "cli/runner/experiment.h"
#include "core/byte_size.h"
#include "core/memory_units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Footprints from 0 up to 2^63 bytes: a hostile trace can claim any.
  const uint64_t footprint = uint64_t{1} << (data[0] % 64);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  absl::StatusOr<uint64_t> bytes = umlab::ParseByteSize(text);
  if (bytes.ok()) {
    (void)umlab::FormatBytes(*bytes);
    uint64_t exact = 0;
    if (absl::SimpleAtoi(text, &exact)) {
      const double error = std::fabs(static_cast<double>(*bytes) - static_cast<double>(exact));
      if (error > static_cast<double>(exact) * 0x1p-52) std::abort();  // wrong value
    }
  }
  absl::StatusOr<uint64_t> frames = umlab::cli::ParseCapacityFrames(text, footprint);
  if (frames.ok() && *frames == 0) std::abort();
  return 0;
}
