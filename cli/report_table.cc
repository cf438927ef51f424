// --format=table for runs: a header line, one row per policy, footnotes,
// then each policy's table memory and final counters.
#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/report.h"
#include "cli/text_table.h"
#include "core/byte_size.h"

namespace umlab::cli {
namespace {

std::string Millis(Nanos ns) { return absl::StrFormat("%.2f ms", static_cast<double>(ns) / 1e6); }

std::string CounterText(const PolicyStats::Value& value) {
  if (const uint64_t* count = std::get_if<uint64_t>(&value)) return absl::StrCat(*count);
  return absl::StrFormat("%g", std::get<double>(value));
}

}  // namespace

std::string RunsTable(const Runs& runs) {
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
  std::vector<std::vector<std::string>> rows = {
      {"policy", "time", "speedup", "steady iter", "stall", "faults", "steady faults/iter", "h2d",
       "d2h", "prefetched (useful)", "evicted", "invalidated"}};
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
  out += RenderTextTable(rows);
  absl::StrAppendFormat(&out, "\nspeedup is against %s; useful = prefetched bytes touched "
                              "before eviction\n",
                        first.policy);
  // Policies with tables of their own (DeepUM's correlation tables) say how
  // much memory those take: DeepUM's Table 4 reports the same quantity.
  // Remote mapping moves bytes that are neither h2d nor d2h (no copy is
  // made): say how many, per policy that mapped any.
  for (const RunResult& run : runs) {
    const RunStats& s = run.stats;
    if (s.remote_mapped_bytes == 0) continue;
    absl::StrAppendFormat(&out,
                          "remote: %s mapped %s and read %s, wrote %s through the mappings; "
                          "peak device memory %s\n",
                          run.policy, FormatBytes(s.remote_mapped_bytes),
                          FormatBytes(s.remote_read_bytes), FormatBytes(s.remote_write_bytes),
                          FormatBytes(s.peak_device_bytes));
  }
  for (const RunResult& run : runs) {
    if (run.policy_table_bytes == 0) continue;
    absl::StrAppendFormat(&out, "policy tables: %s uses %s\n", run.policy,
                          FormatBytes(run.policy_table_bytes));
  }
  // Each policy's own counters, one line each: policies count different
  // things, so a column per counter would be mostly empty.
  for (const RunResult& run : runs) {
    if (run.policy_stats.empty()) continue;
    std::string line = absl::StrCat("policy stats: ", run.policy);
    for (const PolicyStats::Counter& counter : run.policy_stats.counters()) {
      absl::StrAppend(&line, " ", counter.name, "=", CounterText(counter.value));
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace umlab::cli
