#include "cli/report_traces.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/svg_chart.h"

namespace umlab::cli {
namespace {

// Intervals a trace's charts are cut into, as the runs' series are.
constexpr size_t kIntervals = 400;

struct Binned {
  Nanos interval_ns = 1;
  std::vector<double> faults, fault_h2d, prefetch_h2d, d2h;
};

Binned Bin(const Timeline& timeline) {
  Nanos end = 0;
  for (const Timeline::Mark& fault : timeline.faults) end = std::max(end, fault.time);
  for (const Timeline::TransferMark& t : timeline.transfers) end = std::max(end, t.issued);
  Binned out;
  out.interval_ns = std::max<Nanos>(1, end / static_cast<Nanos>(kIntervals) + 1);
  const size_t size = static_cast<size_t>(end / out.interval_ns) + 1;
  for (std::vector<double>* list : {&out.faults, &out.fault_h2d, &out.prefetch_h2d, &out.d2h}) {
    list->assign(size, 0.0);
  }
  auto at = [&](Nanos time) { return static_cast<size_t>(std::max<Nanos>(0, time) / out.interval_ns); };
  for (const Timeline::Mark& fault : timeline.faults) out.faults[at(fault.time)] += 1;
  for (const Timeline::TransferMark& t : timeline.transfers) {
    std::vector<double>& list = t.kind == TransferKind::kEviction   ? out.d2h
                                : t.kind == TransferKind::kPrefetch ? out.prefetch_h2d
                                                                    : out.fault_h2d;
    list[at(t.issued)] += static_cast<double>(t.bytes);
  }
  return out;
}

std::string Metadata(const TraceTimeline& trace, const char* key) {
  for (const auto& [k, v] : trace.metadata) {
    if (k == key) return v;
  }
  return "?";
}

}  // namespace

absl::StatusOr<ReportTrace> ReadReportTrace(const std::string& path) {
  absl::StatusOr<TraceTimeline> trace = TimelineFromTrace(path);
  if (!trace.ok()) return trace.status();
  return ReportTrace{path, *std::move(trace)};
}

std::string TraceSection(const ReportTrace& report) {
  const Binned bins = Bin(report.trace.timeline);
  const double step_ms = static_cast<double>(bins.interval_ns) / 1e6;
  const double span_ms = step_ms * static_cast<double>(bins.faults.size());
  const double interval = static_cast<double>(bins.interval_ns);
  std::string out = absl::StrFormat(
      "<section class=\"trace\">\n<h2>Trace %s: %s, policy %s, %s backend</h2>\n",
      MarkupEscape(report.source), MarkupEscape(Metadata(report.trace, "workload")),
      MarkupEscape(Metadata(report.trace, "policy")),
      MarkupEscape(Metadata(report.trace, "backend")));
  double max_faults = 0;
  for (double f : bins.faults) max_faults = std::max(max_faults, f);
  SvgChart faults(900, 150, {span_ms, "ms"}, {max_faults * 1.05, "faults per interval"});
  faults.Curve(bins.faults, step_ms, PaletteColor(2),
               absl::StrFormat("%d faults recorded", report.trace.timeline.faults.size()));
  double max_rate = 0;
  const std::pair<const std::vector<double>*, const char*> parts[] = {
      {&bins.fault_h2d, "fault migrations issued (h2d)"},
      {&bins.prefetch_h2d, "prefetches issued (h2d)"},
      {&bins.d2h, "write-backs issued (d2h)"}};
  for (const auto& [list, label] : parts) {
    for (double bytes : *list) max_rate = std::max(max_rate, bytes / interval);
  }
  SvgChart link(900, 150, {span_ms, "ms"}, {max_rate * 1.05, "GB/s issued"});
  const char* colors[] = {"#e15759", "#59a14f", "#4e79a7"};
  std::string legend = "<div class=\"legend\">";
  for (size_t i = 0; i < 3; ++i) {
    std::vector<double> rate = *parts[i].first;
    double total = 0;
    for (double& bytes : rate) {
      total += bytes;
      bytes /= interval;  // bytes per nanosecond are GB/s
    }
    link.Curve(rate, step_ms, colors[i],
               absl::StrFormat("%s: %s in all", parts[i].second, ShortBytes(total)));
    absl::StrAppendFormat(&legend, "<span><i style=\"background:%s\"></i>%s</span>", colors[i],
                          parts[i].second);
  }
  absl::StrAppend(&out, "<figure class=\"plot-trace-faults\">\n<figcaption>Faults over time"
                        "</figcaption>\n", faults.Render("trace-faults"), "</figure>\n",
                  "<figure class=\"plot-trace-link\">\n<figcaption>Link traffic by issue time"
                  "</figcaption>\n", legend, "</div>\n", link.Render("trace-link"),
                  "<p class=\"note\">A trace times each transfer when it was issued, not when it "
                  "crossed, so bursts here are queues, not bandwidth.</p>\n</figure>\n"
                  "</section>\n");
  return out;
}

}  // namespace umlab::cli
