// --format=json for runs: docs/json-contract.md.
#include <variant>

#include "absl/strings/str_cat.h"
#include "cli/json_contract.h"
#include "cli/report.h"
#include "core/role_residency.h"

namespace umlab::cli {
namespace {

Json IterationJson(const IterationStats& it) {
  return Json{{"faults", it.faults},
              {"time_ns", it.time_ns},
              {"h2d_bytes", it.h2d_bytes},
              {"d2h_bytes", it.d2h_bytes},
              {"faulted_pages", it.faulted_pages},
              {"faulted_in_flight_pages", it.faulted_in_flight_pages},
              {"prefetch_bytes", it.prefetch_bytes},
              {"evicted_bytes", it.evicted_bytes},
              {"stall_ns", it.stall_ns}};
}

Json PolicyStatsJson(const PolicyStats& stats) {
  Json out = Json::object();
  for (const PolicyStats::Counter& counter : stats.counters()) {
    std::visit([&](auto value) { out[counter.name] = value; }, counter.value);
  }
  return out;
}

// The optional `series` object (docs/json-contract.md): the run over time.
Json SeriesJson(const RunSeries& series) {
  Json out = Json{{"interval_ns", series.interval_ns},
                  {"resident_bytes", series.resident_bytes},
                  {"in_flight_bytes", series.in_flight_bytes},
                  {"prefetched_unused_bytes", series.prefetched_unused_bytes},
                  {"inactive_bytes", series.inactive_bytes},
                  {"fault_h2d_bytes", series.fault_h2d_bytes},
                  {"prefetch_h2d_bytes", series.prefetch_h2d_bytes},
                  {"eviction_d2h_bytes", series.eviction_d2h_bytes},
                  {"faults", series.faults}};
  Json& kernels = out["kernels"] = Json::array();
  for (const KernelSample& k : series.kernels) {
    kernels.push_back(Json{{"name", k.name},
                           {"start_ns", k.start_ns},
                           {"time_ns", k.time_ns},
                           {"faults", k.faults},
                           {"faulted_pages", k.faulted_pages}});
  }
  return out;
}

// Bytes by tensor role; empty when the program gave no roles.
Json RoleBytesJson(const std::array<uint64_t, kTensorRoleCount + 1>& bytes) {
  Json out = Json::object();
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  if (total == 0) return out;
  for (int role = 0; role < kTensorRoleCount; ++role) {
    out[TensorRoleKey(static_cast<TensorRole>(role))] = bytes[role];
  }
  out["unknown"] = bytes[kUnknownRoleSlot];
  return out;
}

Json RunJson(const RunResult& run) {
  Json out = RunScalars(run);
  Json& iterations = out["per_iteration"] = Json::array();
  for (const IterationStats& it : run.stats.per_iteration) iterations.push_back(IterationJson(it));
  if (run.series.has_value()) out["series"] = SeriesJson(*run.series);
  out["peak_device_bytes_by_role"] = RoleBytesJson(run.stats.peak_device_bytes_by_role);
  out["policy_stats"] = PolicyStatsJson(run.policy_stats);
  return out;
}

}  // namespace

std::string RunsJson(const Runs& runs) {
  // One run per line: a diff or a grep of two outputs lines up run by run.
  std::string out = absl::StrCat("{\"", kJsonContractKey, "\":", JsonText(JsonContractVersion()),
                                 ",\"runs\":[");
  for (size_t r = 0; r < runs.size(); ++r) {
    out += r == 0 ? "\n  " : ",\n  ";
    out += JsonText(RunJson(runs[r]));
  }
  out += "\n]}\n";
  return out;
}

}  // namespace umlab::cli
