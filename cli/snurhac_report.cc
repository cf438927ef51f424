#include "cli/snurhac_report.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/json_text.h"
#include "cli/text_table.h"

namespace umlab::cli {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string Millis(Nanos ns) { return absl::StrFormat("%.3f", static_cast<double>(ns) / 1e6); }
std::string MiB(uint64_t bytes) {
  return absl::StrFormat("%.1f", static_cast<double>(bytes) / kMiB);
}

uint64_t PrefetchedBytes(const snurhac::ClusterDeviceStats& s) {
  return s.static_prefetch_bytes + s.adjacent_prefetch_bytes + s.policy_prefetch_bytes;
}

// The one-device time of each program and scheme among the results.
std::map<std::tuple<const GridProgram*, SnurhacScheme>, Nanos> OneDeviceTimes(
    const std::vector<ClusterCaseResult>& results) {
  std::map<std::tuple<const GridProgram*, SnurhacScheme>, Nanos> times;
  for (const ClusterCaseResult& r : results) {
    if (r.request.devices == 1) {
      times[{r.request.program.get(), r.request.scheme}] = r.result.time_ns;
    }
  }
  return times;
}

Nanos BaselineOf(const ClusterCaseResult& r) {
  return snurhac::ExplicitCopyTime(*r.request.program, r.request.config.device);
}

}  // namespace

std::string ClusterTable(const std::vector<ClusterCaseResult>& results) {
  const auto one_device = OneDeviceTimes(results);
  std::vector<std::vector<std::string>> rows = {{"program", "scheme", "gpus", "time ms", "vs CUDA",
                                                 "vs 1 gpu", "copy-in ms", "kernels ms",
                                                 "copy-out ms", "faults", "host MiB", "peer MiB",
                                                 "net MiB", "prefetch MiB", "1-gpu kernels"}};
  for (const ClusterCaseResult& r : results) {
    const snurhac::ClusterResult& c = r.result;
    const double time = static_cast<double>(c.time_ns);
    auto it = one_device.find({r.request.program.get(), r.request.scheme});
    rows.push_back(
        {r.request.program->name, SnurhacSchemeName(r.request.scheme),
         absl::StrCat(r.request.devices), Millis(c.time_ns),
         absl::StrFormat("%.3f", static_cast<double>(BaselineOf(r)) / time),
         it == one_device.end() ? std::string("-")
                                : absl::StrFormat("%.2f", static_cast<double>(it->second) / time),
         Millis(c.copy_in_ns), Millis(c.kernels_ns), Millis(c.copy_out_ns),
         absl::StrCat(c.total.faults), MiB(c.total.host_fetch_bytes), MiB(c.total.peer_fetch_bytes),
         MiB(c.network_bytes), MiB(PrefetchedBytes(c.total)),
         absl::StrFormat("%d/%d", c.single_device_kernels, c.kernels)});
  }
  std::string text = RenderTextTable(rows, 2);
  text +=
      "vs CUDA: the program on one device with explicit copies over its link (the thesis's "
      "baseline); vs 1 gpu: the same scheme on one device\n";
  return text;
}

std::string ClusterJson(const std::vector<ClusterCaseResult>& results) {
  auto counters = [](const snurhac::ClusterDeviceStats& s) {
    Json j;
    j["faults"] = s.faults;
    j["dropped_faults"] = s.dropped_faults;
    j["fault_batches"] = s.fault_batches;
    j["faulted_pages"] = s.faulted_pages;
    j["lock_waits"] = s.lock_waits;
    j["host_fetch_bytes"] = s.host_fetch_bytes;
    j["zero_filled_bytes"] = s.zero_filled_bytes;
    j["peer_fetch_bytes"] = s.peer_fetch_bytes;
    j["upgrades"] = s.upgrades;
    j["downgrades"] = s.downgrades;
    j["static_prefetch_bytes"] = s.static_prefetch_bytes;
    j["adjacent_prefetch_bytes"] = s.adjacent_prefetch_bytes;
    j["policy_prefetch_bytes"] = s.policy_prefetch_bytes;
    j["evictions"] = s.evictions;
    j["write_back_bytes"] = s.write_back_bytes;
    j["kernel_end_unmapped_pages"] = s.kernel_end_unmapped_pages;
    j["peak_frames"] = s.peak_frames;
    j["busy_ns"] = s.busy_ns;
    return j;
  };
  Json runs = Json::array();
  for (const ClusterCaseResult& r : results) {
    const snurhac::ClusterResult& c = r.result;
    Json run;
    run["program"] = r.request.program->name;
    run["footprint_bytes"] = r.request.program->footprint_bytes();
    run["scheme"] = SnurhacSchemeName(r.request.scheme);
    run["devices"] = r.request.devices;
    run["time_ns"] = c.time_ns;
    run["copy_in_ns"] = c.copy_in_ns;
    run["kernels_ns"] = c.kernels_ns;
    run["copy_out_ns"] = c.copy_out_ns;
    run["explicit_copy_ns"] = BaselineOf(r);
    run["kernels"] = c.kernels;
    run["single_device_kernels"] = c.single_device_kernels;
    run["network_bytes"] = c.network_bytes;
    run["policy_table_bytes"] = c.policy_table_bytes;
    run["invariant_checks"] = c.invariant_checks;
    run["total"] = counters(c.total);
    Json devices = Json::array();
    for (const snurhac::ClusterDeviceStats& s : c.devices) devices.push_back(counters(s));
    run["per_device"] = devices;
    runs.push_back(run);
  }
  return JsonText(runs, 2) + "\n";
}

const FormatList<std::vector<ClusterCaseResult>>& ClusterFormats() {
  static const auto* formats = new FormatList<std::vector<ClusterCaseResult>>{
      {"table", "a row per run", ClusterTable},
      {"json", "an object per run, with per-device counters", ClusterJson},
  };
  return *formats;
}

}  // namespace umlab::cli
