#include "core/byte_size.h"

#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace umlab {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  const std::string original(text);
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  size_t unit_start = 0;
  while (unit_start < rest.size() &&
         (absl::ascii_isdigit(rest[unit_start]) || rest[unit_start] == '.')) {
    ++unit_start;
  }
  double number = 0;
  if (unit_start == 0 || !absl::SimpleAtod(rest.substr(0, unit_start), &number)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s' is not a byte size; write e.g. 8GiB, 512MiB or 1048576", original));
  }
  const std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(rest.substr(unit_start)));
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"b", 1},          {"k", 1024},      {"kb", 1e3},
      {"kib", 1024.0},  {"m", 1048576.0},  {"mb", 1e6},      {"mib", 1048576.0},
      {"g", 1073741824.0}, {"gb", 1e9},    {"gib", 1073741824.0},
      {"t", 1099511627776.0}, {"tb", 1e12}, {"tib", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      // Round in double and convert to uint64 directly: llround returns a
      // signed long long, which overflows (to a wrong value, silently) above
      // 2^63 bytes. Every double below 2^64 rounds to one below 2^64.
      const double bytes = std::round(number * scale);
      if (!(bytes < 0x1p64)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("byte size '%s' is too large; the most is 16 EiB - 1", original));
      }
      return static_cast<uint64_t>(bytes);
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown unit in byte size '%s'; use B, KiB, MiB, GiB or TiB (or KB, MB, GB, TB)",
      original));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%d B", bytes);
  return absl::StrFormat("%.2f %s", value, kNames[unit]);
}

}  // namespace umlab
