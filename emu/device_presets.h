// The named device presets `--device` selects, and their overridable parameters.
//
// A preset is one UMLAB_REGISTER_DEVICE entry in device_presets.cc: its name,
// a description and the DeviceConfig values, each number with its source as
// a comment (docs/devices.md gives the sources at length). Every tunable is
// named, defaulted, bounded and documented in DeviceParams, in one place, in
// the manner of the UVM driver's module parameters.
#ifndef UMLAB_EMU_DEVICE_PRESETS_H_
#define UMLAB_EMU_DEVICE_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device_config.h"
#include "core/named_index.h"
#include "core/param_map.h"

namespace umlab {

struct DevicePresetEntry {
  std::string name;         // what --device takes
  std::string description;  // one line for 'umlab devices'
  DeviceConfig config;      // its name is filled from `name` on lookup
};

// Every preset, by name; a name registered twice aborts at start-up.
NamedIndex<DevicePresetEntry>& DevicePresets();

// The preset's config, named; an unknown name lists the presets.
absl::StatusOr<DeviceConfig> DevicePreset(absl::string_view name);

// The overridable parameters, with the preset's values as defaults.
std::vector<ParamInfo> DeviceParams(const DeviceConfig& config);
// Applies "k=v,k=v" overrides (e.g. "h2d_gbps=12,sms=80").
absl::StatusOr<DeviceConfig> ApplyDeviceOverrides(const DeviceConfig& config,
                                                  absl::string_view overrides);

}  // namespace umlab

// Registers a preset from a static initializer; `id` is a unique identifier:
//   UMLAB_REGISTER_DEVICE(h200, {"h200", "description", DeviceConfig{...}});
#define UMLAB_REGISTER_DEVICE(id, ...)                               \
  [[maybe_unused]] static const bool umlab_device_registered_##id = \
      ::umlab::DevicePresets().Add(__VA_ARGS__)

#endif  // UMLAB_EMU_DEVICE_PRESETS_H_
