// The device model's parameters, and the named presets `--device` selects.
//
// Every tunable is named, defaulted and documented here, in one place, in the
// manner of the UVM driver's module parameters. docs/devices.md gives the
// sources of the preset values.
#ifndef UMLAB_EMU_DEVICE_CONFIG_H_
#define UMLAB_EMU_DEVICE_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/compute_spec.h"
#include "core/param_map.h"
#include "emu/pcie_link.h"

namespace umlab {

struct DeviceConfig {
  std::string name;
  LinkConfig link;
  ComputeSpec compute;                   // includes the SM count
  Nanos fault_latency_ns = 45000;        // fetch of a batch to first migration
  int fault_batch_size = 256;            // uvm_perf_fault_batch_count
  int fault_buffer_entries = 8192;       // replayable fault buffer capacity
  Nanos kernel_launch_ns = 0;            // gap between back-to-back kernels
};

// The presets: v100-pcie3, a100-pcie4, h200.
std::vector<std::string> DevicePresetNames();
absl::StatusOr<DeviceConfig> DevicePreset(absl::string_view name);

// The overridable parameters, with the preset's values as defaults.
std::vector<ParamInfo> DeviceParams(const DeviceConfig& config);
// Applies "k=v,k=v" overrides (e.g. "h2d_gbps=12,sms=80").
absl::StatusOr<DeviceConfig> ApplyDeviceOverrides(const DeviceConfig& config,
                                                  absl::string_view overrides);

}  // namespace umlab

#endif  // UMLAB_EMU_DEVICE_CONFIG_H_
