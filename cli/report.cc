#include "cli/report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/byte_size.h"

namespace umlab::cli {
namespace {

template <typename Getter>
double SteadyMean(const RunStats& stats, Getter get) {
  const auto& its = stats.per_iteration;
  if (its.empty()) return 0;
  const size_t first = its.size() > 1 ? 1 : 0;
  double sum = 0;
  for (size_t i = first; i < its.size(); ++i) sum += static_cast<double>(get(its[i]));
  return sum / static_cast<double>(its.size() - first);
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The scalar keys of one run, in contract order. Names are the contract.
std::vector<std::pair<std::string, std::string>> ScalarFields(const RunResult& run) {
  const RunStats& s = run.stats;
  auto n = [](auto value) { return absl::StrCat(value); };
  return {
      {"policy", JsonString(run.policy)},
      {"backend", JsonString(run.backend)},
      {"workload", JsonString(run.workload)},
      {"device", JsonString(run.device)},
      {"capacity_bytes", n(run.capacity_bytes)},
      {"footprint_bytes", n(run.footprint_bytes)},
      {"iterations", n(run.iterations)},
      {"faults", n(s.faults)},
      {"faulted_pages", n(s.faulted_pages)},
      {"faulted_in_flight_pages", n(s.faulted_in_flight_pages)},
      {"fault_batches", n(s.fault_batches)},
      {"h2d_bytes", n(s.h2d_bytes)},
      {"d2h_bytes", n(s.d2h_bytes)},
      {"prefetch_bytes", n(s.prefetch_bytes)},
      {"prefetch_useful_bytes", n(s.prefetch_useful_bytes)},
      {"evicted_bytes", n(s.evicted_bytes)},
      {"invalidated_bytes", n(s.invalidated_bytes)},
      {"time_ns", n(s.time_ns)},
      {"stall_ns", n(s.stall_ns)},
      {"ideal_time_ns", n(s.ideal_time_ns)},
      // Beyond the required contract.
      {"dropped_faults", n(s.dropped_faults)},
      {"fault_migrated_bytes", n(s.fault_migrated_bytes)},
      {"zero_filled_bytes", n(s.zero_filled_bytes)},
      {"evictions", n(s.evictions)},
      {"pre_evictions", n(s.pre_evictions)},
      {"prefetch_requests", n(s.prefetch_requests)},
      {"prefetches_dropped", n(s.prefetches_dropped)},
      {"peak_used_frames", n(s.peak_used_frames)},
      {"kernels", n(s.kernels)},
      {"page_accesses", n(s.page_accesses)},
      {"policy_table_bytes", n(run.policy_table_bytes)},
      {"budget_overshoot_max_bytes", n(s.budget_overshoot_max_bytes)},
      {"budget_overshoot_mean_bytes", n(s.budget_overshoot_mean_bytes)},
      {"fault_records", n(s.fault_records)},
      {"dropped_records", n(s.dropped_records)},
  };
}

std::string FormatJson(const std::vector<RunResult>& runs) {
  std::string out = "{\"runs\":[";
  for (size_t r = 0; r < runs.size(); ++r) {
    if (r > 0) out += ",";
    out += "\n  {";
    bool first = true;
    for (const auto& [key, value] : ScalarFields(runs[r])) {
      absl::StrAppend(&out, first ? "" : ",", "\"", key, "\":", value);
      first = false;
    }
    out += ",\"per_iteration\":[";
    const auto& its = runs[r].stats.per_iteration;
    for (size_t i = 0; i < its.size(); ++i) {
      const IterationStats& it = its[i];
      absl::StrAppendFormat(
          &out,
          "%s{\"faults\":%d,\"time_ns\":%d,\"h2d_bytes\":%d,\"d2h_bytes\":%d,"
          "\"faulted_pages\":%d,\"faulted_in_flight_pages\":%d,\"prefetch_bytes\":%d,"
          "\"evicted_bytes\":%d,\"stall_ns\":%d}",
          i > 0 ? "," : "", it.faults, it.time_ns, it.h2d_bytes, it.d2h_bytes,
          it.faulted_pages, it.faulted_in_flight_pages, it.prefetch_bytes, it.evicted_bytes,
          it.stall_ns);
    }
    out += "]}";
  }
  out += "\n]}\n";
  return out;
}

std::string FormatCsv(const std::vector<RunResult>& runs) {
  std::string out;
  if (runs.empty()) return out;
  std::vector<std::string> header;
  for (const auto& field : ScalarFields(runs[0])) header.push_back(field.first);
  header.push_back("steady_faults_per_iteration");
  header.push_back("steady_time_ns_per_iteration");
  absl::StrAppend(&out, absl::StrJoin(header, ","), "\n");
  for (const RunResult& run : runs) {
    std::vector<std::string> row;
    for (const auto& [key, value] : ScalarFields(run)) {
      // CSV quotes strings by doubling quotes; JSON strings here have none inside.
      row.push_back(value);
    }
    row.push_back(absl::StrFormat("%.1f", SteadyStateMean(run.stats, &IterationStats::faults)));
    row.push_back(absl::StrFormat("%.0f", SteadyStateMeanTime(run.stats)));
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

std::string Millis(Nanos ns) { return absl::StrFormat("%.2f ms", static_cast<double>(ns) / 1e6); }

std::string FormatTable(const std::vector<RunResult>& runs) {
  if (runs.empty()) return "no runs\n";
  const RunResult& first = runs[0];
  std::string out = absl::StrFormat(
      "workload %s on %s (%s backend): footprint %s, capacity %s (%.0f%%), %d iterations\n"
      "pure compute %s; steady state = iterations after the first\n\n",
      first.workload, first.device, first.backend, FormatBytes(first.footprint_bytes),
      FormatBytes(first.capacity_bytes),
      100.0 * static_cast<double>(first.capacity_bytes) /
          static_cast<double>(std::max<uint64_t>(first.footprint_bytes, 1)),
      first.iterations, Millis(first.stats.ideal_time_ns));
  const std::vector<std::string> header = {
      "policy", "time", "speedup", "steady iter", "stall", "faults", "steady faults/iter",
      "h2d", "d2h", "prefetched (useful)", "evicted", "invalidated"};
  std::vector<std::vector<std::string>> rows = {header};
  const double baseline = static_cast<double>(std::max<Nanos>(first.stats.time_ns, 1));
  for (const RunResult& run : runs) {
    const RunStats& s = run.stats;
    const double useful = s.prefetch_bytes == 0 ? 0
                              : 100.0 * static_cast<double>(s.prefetch_useful_bytes) /
                                    static_cast<double>(s.prefetch_bytes);
    rows.push_back({
        run.policy,
        Millis(s.time_ns),
        absl::StrFormat("%.2fx", baseline / static_cast<double>(std::max<Nanos>(s.time_ns, 1))),
        Millis(static_cast<Nanos>(SteadyStateMeanTime(s))),
        Millis(s.stall_ns),
        absl::StrCat(s.faults),
        absl::StrFormat("%.0f", SteadyStateMean(s, &IterationStats::faults)),
        FormatBytes(s.h2d_bytes),
        FormatBytes(s.d2h_bytes),
        s.prefetch_bytes == 0 ? "-"
                              : absl::StrFormat("%s (%.0f%%)", FormatBytes(s.prefetch_bytes), useful),
        FormatBytes(s.evicted_bytes),
        FormatBytes(s.invalidated_bytes),
    });
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < rows[r].size(); ++c) {
      // The policy column reads left to right; numbers line up on the right.
      absl::StrAppend(&out, c == 0 ? "" : "  ",
                      c == 0 ? absl::StrFormat("%-*s", widths[c], rows[r][c])
                             : absl::StrFormat("%*s", widths[c], rows[r][c]));
    }
    out += "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t w : widths) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  absl::StrAppendFormat(&out, "\nspeedup is against %s; useful = prefetched bytes touched "
                              "before eviction\n",
                        first.policy);
  // Policies with tables of their own (DeepUM's correlation tables) say how
  // much memory those take: DeepUM's Table 4 reports the same quantity.
  for (const RunResult& run : runs) {
    if (run.policy_table_bytes == 0) continue;
    absl::StrAppendFormat(&out, "policy tables: %s uses %s\n", run.policy,
                          FormatBytes(run.policy_table_bytes));
  }
  return out;
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrFormat("--format=%s: use table, json or csv", text));
}

double SteadyStateMean(const RunStats& stats, uint64_t IterationStats::*field) {
  return SteadyMean(stats, [field](const IterationStats& it) { return it.*field; });
}

double SteadyStateMeanTime(const RunStats& stats) {
  return SteadyMean(stats, [](const IterationStats& it) { return it.time_ns; });
}

std::string FormatRuns(const std::vector<RunResult>& runs, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: return FormatJson(runs);
    case OutputFormat::kCsv: return FormatCsv(runs);
    case OutputFormat::kTable: return FormatTable(runs);
  }
  return "";
}

}  // namespace umlab::cli
