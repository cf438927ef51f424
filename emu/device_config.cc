#include "emu/device_config.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace umlab {
namespace {

DeviceConfig V100Pcie3() {
  DeviceConfig c;
  c.name = "v100-pcie3";
  // PCIe 3 x16 and 5 us per transfer, as in G10's configuration.
  c.link = LinkConfig{15.754e9, 15.754e9, 5000};
  c.compute = ComputeSpec{15.7e12, 125e12, 900e9, 80};
  c.fault_latency_ns = 45000;  // G10 Table 2
  return c;
}

DeviceConfig A100Pcie4() {
  DeviceConfig c;
  c.name = "a100-pcie4";
  c.link = LinkConfig{31.508e9, 31.508e9, 5000};  // PCIe 4 x16
  c.compute = ComputeSpec{19.5e12, 312e12, 1555e9, 108};
  c.fault_latency_ns = 45000;
  return c;
}

DeviceConfig H200() {
  DeviceConfig c;
  c.name = "h200";
  // Calibrated on an H200 with CUDA 13 by umlab_cuda_calibrate (numbers and
  // method in docs/devices.md). The engine moves at most one 2 MB block per
  // transfer, so the link is fitted to per-block calls, not bulk ones: a
  // 2 MiB prefetch took 151 us to the GPU and 181 us back, which with 10 us
  // per transfer gives 14.9 and 12.3 GB/s. An isolated fault took 31 us end
  // to end: 20 us of fault handling, 10 us of transfer set-up, one page.
  c.link = LinkConfig{14.9e9, 12.3e9, 10000};
  c.compute = ComputeSpec{67e12, 989e12, 4.8e12, 132};
  c.fault_latency_ns = 20000;
  return c;
}

std::string Number(double value) { return absl::StrFormat("%g", value); }

}  // namespace

std::vector<std::string> DevicePresetNames() { return {"v100-pcie3", "a100-pcie4", "h200"}; }

absl::StatusOr<DeviceConfig> DevicePreset(absl::string_view name) {
  if (name == "v100-pcie3") return V100Pcie3();
  if (name == "a100-pcie4") return A100Pcie4();
  if (name == "h200") return H200();
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown device '%s'; presets: %s", name, absl::StrJoin(DevicePresetNames(), ", ")));
}

std::vector<ParamInfo> DeviceParams(const DeviceConfig& c) {
  return {
      {"sms", ParamType::kInt, Number(c.compute.sm_count), "concurrent SMs issuing accesses"},
      {"h2d_gbps", ParamType::kDouble, Number(c.link.h2d_bytes_per_second / 1e9),
       "host-to-device bandwidth, GB/s"},
      {"d2h_gbps", ParamType::kDouble, Number(c.link.d2h_bytes_per_second / 1e9),
       "device-to-host bandwidth, GB/s"},
      {"link_latency_us", ParamType::kDouble, Number(c.link.latency_ns / 1e3),
       "fixed cost of one transfer, us"},
      {"fault_latency_us", ParamType::kDouble, Number(c.fault_latency_ns / 1e3),
       "fault-handling latency per batch, us"},
      {"batch", ParamType::kInt, Number(c.fault_batch_size), "fault entries per batch"},
      {"fault_buffer", ParamType::kInt, Number(c.fault_buffer_entries),
       "fault-buffer entries before overflow"},
      {"fp32_tflops", ParamType::kDouble, Number(c.compute.peak_flops_fp32 / 1e12),
       "peak fp32 TFLOP/s"},
      {"tensor_tflops", ParamType::kDouble, Number(c.compute.peak_flops_tensor / 1e12),
       "peak fp16/bf16 matrix TFLOP/s"},
      {"hbm_gbps", ParamType::kDouble, Number(c.compute.memory_bytes_per_second / 1e9),
       "device memory bandwidth, GB/s"},
      {"launch_us", ParamType::kDouble, Number(c.kernel_launch_ns / 1e3),
       "gap between kernels, us"},
  };
}

absl::StatusOr<DeviceConfig> ApplyDeviceOverrides(const DeviceConfig& config,
                                                  absl::string_view overrides) {
  const std::vector<ParamInfo> declared = DeviceParams(config);
  absl::StatusOr<ParamMap> params =
      ParamMap::Resolve(declared, overrides, absl::StrFormat("device %s", config.name));
  if (!params.ok()) return params.status();
  DeviceConfig c = config;
  // The parser accepts any int64 and any finite double; the model holds
  // counts in ints and times in whole nanoseconds, so a value they cannot
  // hold is rejected here rather than silently truncated or wrapped.
  for (const char* name : {"sms", "batch", "fault_buffer"}) {
    const int64_t value = params->Int(name);
    if (value <= 0 || value > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device parameter %s=%d must be 1..%d", name, value, std::numeric_limits<int>::max()));
    }
  }
  for (const auto& [name, scale] : {std::pair{"h2d_gbps", 1e9}, std::pair{"d2h_gbps", 1e9},
                                    std::pair{"fp32_tflops", 1e12},
                                    std::pair{"tensor_tflops", 1e12},
                                    std::pair{"hbm_gbps", 1e9}}) {
    const double value = params->Double(name);
    if (!(value > 0) || !std::isfinite(value * scale)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("device parameter %s=%g must be positive and finite", name, value));
    }
  }
  // Microseconds that fit in int64 nanoseconds, with room to add them up.
  constexpr double kMaxMicros = 1e12;
  for (const char* name : {"link_latency_us", "fault_latency_us", "launch_us"}) {
    const double value = params->Double(name);
    if (!(value >= 0) || value > kMaxMicros) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "device parameter %s=%g must be 0..%g (microseconds)", name, value, kMaxMicros));
    }
  }
  c.compute.sm_count = static_cast<int>(params->Int("sms"));
  c.link.h2d_bytes_per_second = params->Double("h2d_gbps") * 1e9;
  c.link.d2h_bytes_per_second = params->Double("d2h_gbps") * 1e9;
  c.link.latency_ns = std::llround(params->Double("link_latency_us") * 1e3);
  c.fault_latency_ns = std::llround(params->Double("fault_latency_us") * 1e3);
  c.fault_batch_size = static_cast<int>(params->Int("batch"));
  c.fault_buffer_entries = static_cast<int>(params->Int("fault_buffer"));
  c.compute.peak_flops_fp32 = params->Double("fp32_tflops") * 1e12;
  c.compute.peak_flops_tensor = params->Double("tensor_tflops") * 1e12;
  c.compute.memory_bytes_per_second = params->Double("hbm_gbps") * 1e9;
  c.kernel_launch_ns = std::llround(params->Double("launch_us") * 1e3);
  return c;
}

}  // namespace umlab
