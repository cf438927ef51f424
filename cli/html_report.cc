#include "cli/html_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "cli/output_file.h"
#include "cli/svg_chart.h"

namespace umlab::cli {
namespace {

constexpr int kWide = 900, kSmallHeight = 150, kTallHeight = 260;

double Num(const Json& object, const char* key) {
  return object.contains(key) && object[key].is_number() ? object[key].get<double>() : 0.0;
}

std::vector<double> Values(const Json& list, double scale = 1) {
  std::vector<double> out;
  out.reserve(list.size());
  for (const Json& v : list) out.push_back(v.get<double>() * scale);
  return out;
}

bool HasSeries(const Json& run) { return run.contains("series"); }

// 9,345,555. Built by appending rather than by inserting commas: GCC 12 at
// -O3 reports a false -Wrestrict inside std::string::insert.
std::string Count(double value) {
  const std::string digits = absl::StrFormat("%.0f", value);
  const size_t sign = !digits.empty() && digits[0] == '-' ? 1 : 0;
  std::string out = digits.substr(0, sign);
  for (size_t i = sign; i < digits.size(); ++i) {
    if (i > sign && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string Percent(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.1f%%", 100 * part / whole) : "–";
}

// A group: the runs that differ only in policy.
struct Group {
  std::string title;
  std::vector<const Json*> runs;
};

std::vector<Group> GroupRuns(const std::vector<ReportRun>& runs) {
  std::vector<Group> groups;
  std::map<std::tuple<std::string, std::string, std::string, double>, size_t> index;
  for (const ReportRun& run : runs) {
    const Json& j = run.json;
    const auto key = std::make_tuple(j["workload"].get<std::string>(),
                                     j["device"].get<std::string>(),
                                     j["backend"].get<std::string>(), Num(j, "capacity_bytes"));
    auto [it, added] = index.try_emplace(key, groups.size());
    if (added) {
      groups.push_back(Group{
          absl::StrFormat("%s on %s (%s backend), capacity %s of a %s footprint",
                          std::get<0>(key), std::get<1>(key), std::get<2>(key),
                          ShortBytes(std::get<3>(key)), ShortBytes(Num(j, "footprint_bytes"))),
          {}});
    }
    groups[it->second].runs.push_back(&j);
  }
  return groups;
}

// A series drawn in a chart: its key in the JSON's `series`, its label and
// colour.
struct Part {
  const char* key;
  const char* label;
  const char* color;
};

std::string LegendItem(const char* color, const std::string& label) {
  return absl::StrFormat("<span><i style=\"background:%s\"></i>%s</span>", color,
                         MarkupEscape(label));
}

// The policies' colours.
std::string Legend(const Group& group) {
  std::string out = "<div class=\"legend\">";
  for (size_t p = 0; p < group.runs.size(); ++p) {
    out += LegendItem(PaletteColor(p), (*group.runs[p])["policy"].get<std::string>());
  }
  return out + "</div>\n";
}

// The parts' colours.
std::string Legend(absl::Span<const Part> parts) {
  std::string out = "<div class=\"legend\">";
  for (const Part& part : parts) out += LegendItem(part.color, part.label);
  return out + "</div>\n";
}

std::string Figure(const std::string& plot, const std::string& caption, const std::string& body) {
  return absl::StrFormat("<figure class=\"plot-%s\">\n<figcaption>%s</figcaption>\n%s</figure>\n", plot,
                         caption, body);
}

std::string NoSeries(const std::string& what) {
  return absl::StrFormat(
      "<p class=\"missing\">No %s: the JSON has no <code>series</code>. Run with "
      "<code>--series</code> (or <code>compare --report</code>) to record it.</p>\n",
      what);
}

std::string ComparisonTable(const Group& group) {
  const Json& base = *group.runs.front();
  std::string out =
      "<table class=\"comparison\" data-plot=\"comparison\">\n<tr><th>policy</th><th>time</th>"
      "<th>speedup</th><th>steady iteration</th><th>stall</th><th>faults</th>"
      "<th>h2d</th><th>d2h</th><th>prefetched</th><th>prefetch used</th>"
      "<th>late faulted pages</th></tr>\n";
  for (size_t p = 0; p < group.runs.size(); ++p) {
    const Json& run = *group.runs[p];
    const Json& its = run["per_iteration"];
    double steady = 0;
    const size_t first = its.size() > 1 ? 1 : 0;
    for (size_t i = first; i < its.size(); ++i) steady += Num(its[i], "time_ns");
    if (its.size() > first) steady /= static_cast<double>(its.size() - first);
    absl::StrAppendFormat(
        &out,
        "<tr><td><i style=\"background:%s\"></i>%s</td><td>%s</td><td>%s</td><td>%s</td>"
        "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
        PaletteColor(p), MarkupEscape(run["policy"].get<std::string>()),
        ShortTime(Num(run, "time_ns")),
        Num(run, "time_ns") > 0
            ? absl::StrFormat("%.2fx", Num(base, "time_ns") / Num(run, "time_ns"))
            : "–",
        its.empty() ? "–" : ShortTime(steady), ShortTime(Num(run, "stall_ns")),
        Count(Num(run, "faults")), ShortBytes(Num(run, "h2d_bytes")), ShortBytes(Num(run, "d2h_bytes")),
        ShortBytes(Num(run, "prefetch_bytes")),
        Percent(Num(run, "prefetch_useful_bytes"), Num(run, "prefetch_bytes")),
        Percent(Num(run, "faulted_in_flight_pages"), Num(run, "faulted_pages")));
  }
  absl::StrAppendFormat(&out,
                        "</table>\n<p class=\"note\">Speedup against %s, the first run. Steady "
                        "iteration: the mean of every iteration but the first. Late: faulted "
                        "pages already on their way to the device.</p>\n",
                        MarkupEscape(base["policy"].get<std::string>()));
  return out;
}

std::string IterationsPlot(const Group& group) {
  size_t iterations = 0;
  double max_ms = 0;
  for (const Json* run : group.runs) {
    iterations = std::max(iterations, (*run)["per_iteration"].size());
    for (const Json& it : (*run)["per_iteration"]) max_ms = std::max(max_ms, Num(it, "time_ns") / 1e6);
  }
  if (iterations == 0) return "<p class=\"missing\">No iterations in these runs.</p>\n";
  SvgChart chart(kWide, kTallHeight, {static_cast<double>(iterations), "iteration"},
                 {max_ms * 1.05, "ms"});
  const double width = 0.8 / static_cast<double>(group.runs.size());
  for (size_t p = 0; p < group.runs.size(); ++p) {
    const Json& run = *group.runs[p];
    const std::string policy = run["policy"].get<std::string>();
    const Json& its = run["per_iteration"];
    for (size_t i = 0; i < its.size(); ++i) {
      const double x0 = static_cast<double>(i) + 0.1 + width * static_cast<double>(p);
      const double time = Num(its[i], "time_ns"), stall = Num(its[i], "stall_ns");
      const std::string tip = absl::StrFormat("%s, iteration %d: %s, stall %s, %.0f faults",
                                              policy, i, ShortTime(time), ShortTime(stall),
                                              Num(its[i], "faults"));
      chart.Box(x0, x0 + width, 0, time / 1e6, PaletteColor(p), tip);
      chart.Box(x0, x0 + width, 0, std::min(stall, time) / 1e6, "rgba(0,0,0,0.35)",
                tip);
    }
  }
  return Legend(group) + chart.Render("iterations") +
         "<p class=\"note\">Each bar is one iteration's time; its dark part is the time the "
         "SMs stalled on faults.</p>\n";
}

std::string KernelFaultsPlot(const Group& group) {
  size_t kernels = 0;
  bool any = false;
  for (const Json* run : group.runs) {
    if (!HasSeries(*run)) continue;
    any = true;
    const Json& list = (*run)["series"]["kernels"];
    kernels = std::max(kernels, list.size());
  }
  if (!any) return NoSeries("faults per kernel");
  std::string out;
  for (size_t p = 0; p < group.runs.size(); ++p) {
    const Json& run = *group.runs[p];
    const std::string policy = run["policy"].get<std::string>();
    if (!HasSeries(run)) {
      out += NoSeries("faults per kernel for " + MarkupEscape(policy));
      continue;
    }
    // Each policy on its own scale: where its faults fall matters more here
    // than how many (the table compares the totals).
    const Json& list = run["series"]["kernels"];
    double max_faults = 0;
    for (const Json& k : list) max_faults = std::max(max_faults, Num(k, "faults"));
    SvgChart chart(kWide, kSmallHeight,
                   {static_cast<double>(kernels), "kernel of the last iteration (" + policy + ")"},
                   {max_faults * 1.05, "faults"});
    for (size_t k = 0; k < list.size(); ++k) {
      const double faults = Num(list[k], "faults");
      if (faults <= 0) continue;  // a bar of zero height shows nothing to hover
      chart.Box(static_cast<double>(k), static_cast<double>(k + 1), 0, faults, PaletteColor(p),
                absl::StrFormat("%s: kernel %d %s: %.0f faults, %.0f pages, %s", policy, k,
                                list[k]["name"].get<std::string>(), faults,
                                Num(list[k], "faulted_pages"), ShortTime(Num(list[k], "time_ns"))));
    }
    out += chart.Render("kernel-faults");
  }
  return out +
         "<p class=\"note\">Raw fault entries of the batches serviced while each kernel of the "
         "last iteration ran, each policy on its own scale; hover a bar for the kernel's "
         "name.</p>\n";
}

double LongestRunMs(const Group& group) {
  double max_ms = 0;
  for (const Json* run : group.runs) max_ms = std::max(max_ms, Num(*run, "time_ns") / 1e6);
  return max_ms;
}

// One chart per policy of the parts of its `series`, on axes shared by the
// group (time to the longest run), or a note where the series are missing.
// draw(chart, run, policy) adds the marks.
template <typename Draw>
std::string SeriesCharts(const Group& group, absl::Span<const Part> parts, const std::string& what,
                         const std::string& unit, double y_max, const std::string& plot,
                         Draw draw) {
  if (std::none_of(group.runs.begin(), group.runs.end(),
                   [](const Json* run) { return HasSeries(*run); })) {
    return NoSeries(what);
  }
  std::string out = Legend(parts);
  for (const Json* run : group.runs) {
    const std::string policy = (*run)["policy"].get<std::string>();
    if (!HasSeries(*run)) {
      out += NoSeries(what + " for " + MarkupEscape(policy));
      continue;
    }
    SvgChart chart(kWide, kSmallHeight, {LongestRunMs(group), "ms (" + policy + ")"},
                   {y_max * 1.05, unit});
    draw(chart, *run, policy);
    out += chart.Render(plot);
  }
  return out;
}

constexpr Part kResidencyParts[] = {
    {"resident_bytes", "resident", "#4e79a7"},
    {"in_flight_bytes", "in flight", "#f28e2b"},
    {"prefetched_unused_bytes", "prefetched, unused", "#59a14f"},
    {"inactive_bytes", "inactive", "#bab0ac"},
};

std::string ResidencyPlot(const Group& group) {
  double max_bytes = 0;
  for (const Json* run : group.runs) {
    max_bytes = std::max(max_bytes, Num(*run, "capacity_bytes"));
    if (!HasSeries(*run)) continue;
    const Json& s = (*run)["series"];
    for (size_t i = 0; i < s["resident_bytes"].size(); ++i) {
      double total = 0;
      for (const Part& part : kResidencyParts) {
        total += i < s[part.key].size() ? s[part.key][i].get<double>() : 0;
      }
      max_bytes = std::max(max_bytes, total);
    }
  }
  auto draw = [](SvgChart& chart, const Json& run, const std::string& policy) {
    const Json& s = run["series"];
    std::vector<double> lower(s["resident_bytes"].size(), 0.0);
    for (const Part& part : kResidencyParts) {
      std::vector<double> upper = lower;
      const std::vector<double> values = Values(s[part.key], 1e-9);
      double peak = 0;
      for (size_t i = 0; i < upper.size() && i < values.size(); ++i) {
        upper[i] += values[i];
        peak = std::max(peak, values[i]);
      }
      chart.Band(lower, upper, Num(s, "interval_ns") / 1e6, part.color,
                 absl::StrFormat("%s: %s, at most %s", policy, part.label, ShortBytes(peak * 1e9)));
      lower = std::move(upper);
    }
    chart.Rule(Num(run, "capacity_bytes") / 1e9, "#e15759",
               "capacity " + ShortBytes(Num(run, "capacity_bytes")));
  };
  return SeriesCharts(group, kResidencyParts, "residency over time", "GB", max_bytes / 1e9,
                      "residency", draw) +
         "<p class=\"note\">Device memory after the first engine step of each interval, stacked: "
         "resident pages in use, pages on their way in, prefetched pages not yet accessed, and "
         "resident pages the allocator holds free.</p>\n";
}

constexpr Part kLinkParts[] = {
    {"fault_h2d_bytes", "fault migrations (h2d)", "#e15759"},
    {"prefetch_h2d_bytes", "prefetches (h2d)", "#59a14f"},
    {"eviction_d2h_bytes", "write-backs (d2h)", "#4e79a7"},
};

std::string LinkPlot(const Group& group) {
  double max_rate = 0;
  for (const Json* run : group.runs) {
    if (!HasSeries(*run)) continue;
    const Json& s = (*run)["series"];
    for (const Part& part : kLinkParts) {
      for (const Json& v : s[part.key]) {
        max_rate = std::max(max_rate, v.get<double>() / Num(s, "interval_ns"));
      }
    }
  }
  auto draw = [](SvgChart& chart, const Json& run, const std::string& policy) {
    const Json& s = run["series"];
    const double interval = Num(s, "interval_ns");
    for (const Part& part : kLinkParts) {
      // Bytes per nanosecond are GB/s.
      const std::vector<double> rate = Values(s[part.key], 1 / interval);
      double total = 0;
      for (const Json& v : s[part.key]) total += v.get<double>();
      chart.Curve(rate, interval / 1e6, part.color,
                  absl::StrFormat("%s: %s, %s in all", policy, part.label, ShortBytes(total)));
    }
  };
  return SeriesCharts(group, kLinkParts, "link use over time", "GB/s", max_rate, "link", draw) +
         "<p class=\"note\">Bytes that finished crossing the link in each interval, as a rate. "
         "Host to device: fault migrations and prefetches; device to host: write-backs.</p>\n";
}

std::string PrefetchPlot(const Group& group) {
  const double n = static_cast<double>(group.runs.size());
  double max_bytes = 0;
  for (const Json* run : group.runs) max_bytes = std::max(max_bytes, Num(*run, "prefetch_bytes"));
  const SvgChart::Axis policies{n, "policies, in the table's order", /*ticks=*/false};
  SvgChart used(kWide / 2 - 10, kTallHeight, policies, {max_bytes * 1.05 / 1e9, "GB prefetched"});
  SvgChart late(kWide / 2 - 10, kTallHeight, policies, {100, "% of faulted pages late"});
  for (size_t p = 0; p < group.runs.size(); ++p) {
    const Json& run = *group.runs[p];
    const std::string policy = run["policy"].get<std::string>();
    const double x = static_cast<double>(p);
    const double prefetched = Num(run, "prefetch_bytes"), useful = Num(run, "prefetch_useful_bytes");
    used.Box(x + 0.15, x + 0.85, 0, prefetched / 1e9, "#d9d9d9",
             absl::StrFormat("%s: %s prefetched, %s unused", policy, ShortBytes(prefetched),
                             ShortBytes(prefetched - useful)));
    used.Box(x + 0.15, x + 0.85, 0, useful / 1e9, PaletteColor(p),
             absl::StrFormat("%s: %s of the prefetched bytes used (%s)", policy, ShortBytes(useful),
                             Percent(useful, prefetched)));
    const double pages = Num(run, "faulted_pages"), in_flight = Num(run, "faulted_in_flight_pages");
    late.Box(x + 0.15, x + 0.85, 0, pages > 0 ? 100 * in_flight / pages : 0, PaletteColor(p),
             absl::StrFormat("%s: %.0f of %.0f faulted pages were already in flight (%s)", policy,
                             in_flight, pages, Percent(in_flight, pages)));
  }
  return Legend(group) + "<div class=\"pair\">" + used.Render("prefetch") +
         late.Render("lateness") +
         "</div>\n<p class=\"note\">Left: bytes prefetched (grey) and the part accessed before "
         "eviction or the end (colour). Right: faulted pages that were already on their way, a "
         "prefetch that came too late (<code>faulted_in_flight_pages</code>).</p>\n";
}

constexpr char kStyle[] = R"(<style>
body{font-family:sans-serif;margin:24px;max-width:940px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ccc}
figure{margin:18px 0}figcaption{font-weight:bold;margin-bottom:4px}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}
i{display:inline-block;width:10px;height:10px;margin-right:4px}
.legend{font-size:12px;margin:4px 0}.legend span{margin-right:14px}
.note{font-size:12px;color:#555}.missing{color:#a33}.pair{display:flex;gap:12px}
</style>
)";

}  // namespace

const std::vector<std::string>& ReportPlotNames() {
  static const auto* names = new std::vector<std::string>{
      "comparison", "iterations", "kernel-faults", "residency", "link", "prefetch", "lateness"};
  return *names;
}

std::string RenderHtmlReport(const std::vector<ReportRun>& runs,
                             const std::vector<ReportTrace>& traces) {
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>umlab report</title>\n",
      kStyle, "</head>\n<body>\n<h1>umlab report</h1>\n");
  std::set<std::string> sources;
  for (const ReportRun& run : runs) sources.insert(run.source);
  for (const Group& group : GroupRuns(runs)) {
    absl::StrAppend(&out, "<section class=\"group\">\n<h2>", MarkupEscape(group.title), "</h2>\n",
                    Figure("comparison", "Comparison", ComparisonTable(group)),
                    Figure("iterations", "Time and stall per iteration", IterationsPlot(group)),
                    Figure("kernel-faults", "Faults per kernel along the last iteration",
                           KernelFaultsPlot(group)),
                    Figure("residency", "Device memory over time", ResidencyPlot(group)),
                    Figure("link", "Link use per direction over time", LinkPlot(group)),
                    Figure("prefetch", "Prefetch usefulness and lateness", PrefetchPlot(group)),
                    "</section>\n");
  }
  for (const ReportTrace& trace : traces) {
    out += TraceSection(trace);
    sources.insert(trace.source);
  }
  absl::StrAppend(&out, "<p class=\"note\">Drawn by umlab report from ",
                  MarkupEscape(absl::StrJoin(sources, ", ")),
                  " (the JSON contract, docs/json-contract.md, and the .umt format, "
                  "docs/trace-format.md).</p>\n</body>\n</html>\n");
  return out;
}

absl::Status WriteHtmlReport(const std::vector<ReportRun>& runs,
                             const std::vector<ReportTrace>& traces, const std::string& path) {
  const std::string html = RenderHtmlReport(runs, traces);
  return WriteOutputFile(path, "report", [&](std::ostream& out) { out << html; });
}

}  // namespace umlab::cli
