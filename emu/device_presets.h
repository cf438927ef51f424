// The named device presets `--device` selects, and their overridable parameters.
//
// Every tunable is named, defaulted and documented here, in one place, in the
// manner of the UVM driver's module parameters. docs/devices.md gives the
// sources of the preset values.
#ifndef UMLAB_EMU_DEVICE_PRESETS_H_
#define UMLAB_EMU_DEVICE_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device_config.h"
#include "core/param_map.h"

namespace umlab {

// The presets: v100-pcie3, a100-pcie4, h200.
std::vector<std::string> DevicePresetNames();
absl::StatusOr<DeviceConfig> DevicePreset(absl::string_view name);

// The overridable parameters, with the preset's values as defaults.
std::vector<ParamInfo> DeviceParams(const DeviceConfig& config);
// Applies "k=v,k=v" overrides (e.g. "h2d_gbps=12,sms=80").
absl::StatusOr<DeviceConfig> ApplyDeviceOverrides(const DeviceConfig& config,
                                                  absl::string_view overrides);

}  // namespace umlab

#endif  // UMLAB_EMU_DEVICE_PRESETS_H_
