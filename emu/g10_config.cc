#include "emu/g10_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "emu/device_presets.h"

namespace umlab {
namespace {

// Keys G10's simulator (src/main.cc) accepts that umlab does not apply.
const absl::flat_hash_set<std::string>& IgnoredKeys() {
  static const auto* keys = new absl::flat_hash_set<std::string>{
      "output_folder", "output_override", "is_simulation", "is_profiling", "is_individual",
      "is_compile", "compile_max_thread_num", "is_run", "is_cudnn", "is_resnet",
      "is_inception", "is_senet", "is_transformer", "trans_borden", "batch_size", "input_H",
      "input_W", "num_iteration", "num_threads", "is_input_pf_only", "is_UVM", "use_prefetch",
      "nn_model_input_file", "orig_kernel_time_file", "workspace_size_file",
      "input_pf_kernel_time_file", "pf_kernel_time_file", "stat_output_file",
      "migration_policy", "eviction_policy", "num_candidate", "prefetch_degree",
      "delta_parameter", "GPU_frequency_GHz", "GPU_malloc_uspB", "GPU_free_uspB",
      "SSD_latency_us", "PCIe_batch_size_page", "kernel_time_std_dev", "ran_seed",
      "kernel_speedup"};
  return *keys;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

absl::StatusOr<G10Machine> ParseG10Config(absl::string_view text, absl::string_view source) {
  absl::StatusOr<DeviceConfig> base = DevicePreset("g10-a100");
  if (!base.ok()) return base.status();
  G10Machine machine;
  machine.device = *base;
  machine.device.name = std::string(source);
  std::optional<double> cpu_gbps, gpu_gbps;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty() || absl::StartsWith(words[0], "#")) continue;
    const std::string key(words[0]);
    const auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s:%d: %s '%s'; %s", source, line_number, what, key,
                          "G10 config files hold one `key value` per line (docs/g10.md)"));
    };
    if (IgnoredKeys().contains(key)) {
      machine.ignored.push_back(key);
      continue;
    }
    double value = 0;
    if (words.size() != 2 || !absl::SimpleAtod(words[1], &value) || !std::isfinite(value) ||
        value < 0) {
      return error("expected one non-negative number after");
    }
    // The bounds of the matching --device-param (emu/device_presets.cc), so
    // that every product later stays finite: rates in GB/s and sizes in GB
    // up to 1e9, times in us up to 1e12.
    const bool is_time = absl::EndsWith(key, "_us");
    if (value > (is_time ? 1e12 : 1e9)) return error("value out of range for");
    DeviceConfig& d = machine.device;
    if (key == "system_latency_us") {
      d.fault_latency_ns = std::llround(value * 1e3);
    } else if (key == "CPU_PCIe_bandwidth_GBps") {
      cpu_gbps = value;
    } else if (key == "GPU_PCIe_bandwidth_GBps") {
      gpu_gbps = value;
    } else if (key == "PCIe_latency_us") {
      d.link.latency_ns = std::llround(value * 1e3);
    } else if (key == "CPU_memory_line_GB") {
      d.host_memory_bytes = static_cast<uint64_t>(std::llround(value * kGiB));
    } else if (key == "SSD_PCIe_bandwidth_GBps") {
      d.link.storage.read_bytes_per_second = value * 1e9;
      d.link.storage.write_bytes_per_second = value * 1e9;
    } else if (key == "SSD_read_latency_us") {
      d.link.storage.read_latency_ns = std::llround(value * 1e3);
    } else if (key == "SSD_write_latency_us") {
      d.link.storage.write_latency_ns = std::llround(value * 1e3);
    } else if (key == "GPU_memory_size_GB") {
      machine.device.memory_bytes = static_cast<uint64_t>(std::llround(value * kGiB));
    } else {
      return error("G10's simulator knows no key");
    }
  }
  // Host traffic runs at the slower of the host's and the GPU's PCIe.
  if (cpu_gbps || gpu_gbps) {
    const double gbps = cpu_gbps && gpu_gbps ? std::min(*cpu_gbps, *gpu_gbps)
                                             : cpu_gbps.value_or(gpu_gbps.value_or(0));
    if (gbps <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: the PCIe bandwidth must be positive", source));
    }
    machine.device.link.h2d_bytes_per_second = gbps * 1e9;
    machine.device.link.d2h_bytes_per_second = gbps * 1e9;
  }
  const StorageConfig& storage = machine.device.link.storage;
  if (storage.read_bytes_per_second <= 0 || storage.write_bytes_per_second <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: SSD_PCIe_bandwidth_GBps must be positive", source));
  }
  if (machine.device.memory_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: GPU_memory_size_GB must be positive", source));
  }
  return machine;
}

absl::StatusOr<G10Machine> ReadG10Config(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrFormat("cannot read G10 config file '%s'; check the path", path));
  }
  std::ostringstream text;
  text << file.rdbuf();
  return ParseG10Config(text.str(), path);
}

}  // namespace umlab
