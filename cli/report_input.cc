#include "cli/report_input.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "cli/json_contract.h"

namespace umlab::cli {
namespace {

absl::Status Bad(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: %s; pass the output of 'umlab run|replay|compare --format=json'", source, what));
}

// Every key the report draws, with its type. Optional keys (`series`) are
// checked where present.
absl::Status CheckRun(const Json& run, size_t index, const std::string& source) {
  const std::string where = absl::StrFormat("run %d", index);
  if (!run.is_object()) return Bad(source, where + " is not an object");
  for (const char* key : {"policy", "backend", "workload", "device"}) {
    if (!run.contains(key) || !run[key].is_string()) {
      return Bad(source, absl::StrFormat("%s has no string \"%s\"", where, key));
    }
  }
  for (const char* key :
       {"capacity_bytes", "footprint_bytes", "iterations", "faults", "faulted_pages",
        "faulted_in_flight_pages", "h2d_bytes", "d2h_bytes", "prefetch_bytes",
        "prefetch_useful_bytes", "time_ns", "stall_ns", "ideal_time_ns"}) {
    if (!run.contains(key) || !run[key].is_number()) {
      return Bad(source, absl::StrFormat("%s has no number \"%s\"", where, key));
    }
  }
  if (!run.contains("per_iteration") || !run["per_iteration"].is_array()) {
    return Bad(source, where + " has no \"per_iteration\" list");
  }
  for (const Json& it : run["per_iteration"]) {
    if (!it.is_object() || !it.contains("time_ns") || !it["time_ns"].is_number() ||
        !it.contains("stall_ns") || !it["stall_ns"].is_number()) {
      return Bad(source, where + ": a \"per_iteration\" entry lacks time_ns or stall_ns");
    }
  }
  if (!run.contains("series")) return absl::OkStatus();
  const Json& series = run["series"];
  if (!series.is_object() || !series.contains("interval_ns") ||
      !series["interval_ns"].is_number() || series["interval_ns"].get<double>() <= 0) {
    return Bad(source, where + ": \"series\" has no positive interval_ns");
  }
  for (const char* key : {"resident_bytes", "in_flight_bytes", "prefetched_unused_bytes",
                          "inactive_bytes", "fault_h2d_bytes", "prefetch_h2d_bytes",
                          "eviction_d2h_bytes", "faults"}) {
    if (!series.contains(key) || !series[key].is_array()) {
      return Bad(source, absl::StrFormat("%s: \"series\" has no list \"%s\"", where, key));
    }
    for (const Json& value : series[key]) {
      if (!value.is_number()) {
        return Bad(source, absl::StrFormat("%s: \"series\".\"%s\" holds a non-number", where,
                                           key));
      }
    }
  }
  if (!series.contains("kernels") || !series["kernels"].is_array()) {
    return Bad(source, where + ": \"series\" has no \"kernels\" list");
  }
  for (const Json& kernel : series["kernels"]) {
    if (!kernel.is_object() || !kernel.contains("name") || !kernel["name"].is_string() ||
        !kernel.contains("faults") || !kernel["faults"].is_number() ||
        !kernel.contains("time_ns") || !kernel["time_ns"].is_number()) {
      return Bad(source, where + ": a \"series\" kernel lacks name, faults or time_ns");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ReportRun>> ParseReportRuns(const std::string& text,
                                                        const std::string& source) {
  Json document = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return Bad(source, "not valid JSON");
  if (!document.is_object() || !document.contains("runs") || !document["runs"].is_array()) {
    return Bad(source, "no \"runs\" list");
  }
  if (absl::Status version = CheckJsonContractVersion(document, source); !version.ok()) {
    return version;
  }
  if (document["runs"].empty()) return Bad(source, "the \"runs\" list is empty");
  std::vector<ReportRun> runs;
  for (size_t i = 0; i < document["runs"].size(); ++i) {
    Json& run = document["runs"][i];
    if (absl::Status s = CheckRun(run, i, source); !s.ok()) return s;
    runs.push_back(ReportRun{source, std::move(run)});
  }
  return runs;
}

absl::StatusOr<std::vector<ReportRun>> ReadReportRuns(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrFormat("%s: cannot open the JSON; check the path", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseReportRuns(text.str(), path);
}

}  // namespace umlab::cli
