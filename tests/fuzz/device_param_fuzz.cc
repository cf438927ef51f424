// Fuzzes `--device-param k=v,...` (ApplyDeviceOverrides, emu/device_presets.h)
// on every preset. Input: one byte choosing the preset, then the overrides.
//
// An accepted override must be applied as written: counts keep their value
// (no silent truncation to int), rates stay finite and positive, and
// latencies stay finite and non-negative.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "emu/device_presets.h"
#include "fuzz_require.h"  // beside this file: the layers keep tests/ off the path

using umlab::fuzz::PositiveRate;
using umlab::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> presets = [] {
    std::vector<std::string> names;
    for (const auto* entry : umlab::DevicePresets().Entries()) names.push_back(entry->name);
    return names;
  }();
  if (size == 0) return 0;
  absl::StatusOr<umlab::DeviceConfig> preset =
      umlab::DevicePreset(presets[data[0] % presets.size()]);
  Require(preset.ok());
  const std::string overrides(reinterpret_cast<const char*>(data + 1), size - 1);
  absl::StatusOr<umlab::DeviceConfig> c = umlab::ApplyDeviceOverrides(*preset, overrides);
  if (!c.ok()) return 0;
  Require(c->compute.sm_count > 0 && c->fault_batch_size > 0 && c->fault_buffer_entries > 0);
  Require(PositiveRate(c->link.h2d_bytes_per_second) && PositiveRate(c->link.d2h_bytes_per_second));
  Require(PositiveRate(c->compute.peak_flops_fp32) && PositiveRate(c->compute.peak_flops_tensor));
  Require(PositiveRate(c->compute.memory_bytes_per_second));
  Require(c->link.latency_ns >= 0 && c->fault_latency_ns >= 0 && c->kernel_launch_ns >= 0);
  Require(PositiveRate(c->link.storage.read_bytes_per_second) &&
          PositiveRate(c->link.storage.write_bytes_per_second));
  Require(c->link.storage.read_latency_ns >= 0 && c->link.storage.write_latency_ns >= 0);
  return 0;
}
