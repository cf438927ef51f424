// Parsing and printing byte counts such as "8GiB", "512MiB" or "4096".
#ifndef UMLAB_CORE_BYTE_SIZE_H_
#define UMLAB_CORE_BYTE_SIZE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace umlab {

// Accepts a non-negative integer or decimal with an optional unit: B, KB/KiB,
// MB/MiB, GB/GiB, TB/TiB (decimal units are powers of 1000, binary of 1024;
// case-insensitive). Returns InvalidArgument naming the text otherwise.
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// "1.50 GiB", "2.00 MiB", "512 B": for tables.
std::string FormatBytes(uint64_t bytes);

}  // namespace umlab

#endif  // UMLAB_CORE_BYTE_SIZE_H_
