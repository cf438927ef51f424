// Fuzzes G10's config files read as a device (ParseG10Config,
// emu/g10_config.h). Input: the file's text.
//
// An accepted file must give a device the models can compute with: rates
// finite and positive, times and sizes finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "emu/g10_config.h"
#include "fuzz_require.h"  // beside this file: the layers keep tests/ off the path

using umlab::fuzz::PositiveRate;
using umlab::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<umlab::G10Machine> machine = umlab::ParseG10Config(text, "fuzz.config");
  if (!machine.ok()) {
    Require(std::string(machine.status().message()).find('\n') == std::string::npos);
    return 0;
  }
  const umlab::DeviceConfig& d = machine->device;
  Require(PositiveRate(d.link.h2d_bytes_per_second) && PositiveRate(d.link.d2h_bytes_per_second));
  Require(PositiveRate(d.link.storage.read_bytes_per_second) &&
          PositiveRate(d.link.storage.write_bytes_per_second));
  Require(d.link.latency_ns >= 0 && d.fault_latency_ns >= 0);
  Require(d.link.storage.read_latency_ns >= 0 && d.link.storage.write_latency_ns >= 0);
  Require(d.memory_bytes > 0);
  return 0;
}
