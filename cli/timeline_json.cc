#include "cli/timeline_json.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "cli/json_text.h"

namespace umlab::cli {
namespace {

constexpr int kPid = 1;

// Trace-event times are microseconds; nanoseconds stay exact as decimals.
double Micros(Nanos ns) { return static_cast<double>(ns) / 1000.0; }

std::string Address(uint64_t address) { return absl::StrFormat("%#x", address); }

// Writes events one per line, comma-separated.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}
  void Write(const Json& event) {
    out_ << (first_ ? "\n" : ",\n") << JsonText(event);
    first_ = false;
  }
  Json Base(const char* phase, std::string name, TimelineTrack track, Nanos time) {
    return Json{{"name", std::move(name)},
                {"ph", phase},
                {"ts", Micros(time)},
                {"pid", kPid},
                {"tid", static_cast<int>(track)}};
  }
  void Slice(std::string name, TimelineTrack track, Nanos begin, Nanos end, Json args) {
    Json event = Base("X", std::move(name), track, begin);
    event["dur"] = Micros(std::max<Nanos>(0, end - begin));
    event["args"] = std::move(args);
    Write(event);
  }
  void Instant(std::string name, TimelineTrack track, Nanos time, Json args) {
    Json event = Base("i", std::move(name), track, time);
    event["s"] = "t";
    event["args"] = std::move(args);
    Write(event);
  }
  void Counter(const char* name, Nanos time, Json args) {
    Json event = Base("C", name, TimelineTrack::kCompute, time);
    event["args"] = std::move(args);
    Write(event);
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

const char* TrackName(TimelineTrack track) {
  switch (track) {
    case TimelineTrack::kCompute: return "compute stream";
    case TimelineTrack::kFaultService: return "fault service";
    case TimelineTrack::kHostToDevice: return "h2d link";
    case TimelineTrack::kDeviceToHost: return "d2h link";
    case TimelineTrack::kPrefetches: return "prefetches issued";
    case TimelineTrack::kInvalidations: return "invalidations";
    case TimelineTrack::kDeviceEvictions: return "device evictions";
    case TimelineTrack::kFaults: return "faults";
  }
  return "?";
}

const char* TransferName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kFaultMigration: return "fault migration";
    case TransferKind::kPrefetch: return "prefetch";
    case TransferKind::kEviction: return "write-back";
  }
  return "?";
}

std::string KernelName(const Timeline& timeline, uint32_t exec_id) {
  auto it = timeline.kernel_names.find(exec_id);
  return it != timeline.kernel_names.end() ? it->second : absl::StrFormat("kernel %d", exec_id);
}

void WriteComputeStream(const Timeline& timeline, EventWriter& events) {
  for (const Timeline::Iteration& it : timeline.iterations) {
    const std::string name = absl::StrFormat("iteration %d", it.index);
    events.Write(events.Base("B", name, TimelineTrack::kCompute, it.begin));
    events.Write(events.Base("E", name, TimelineTrack::kCompute, it.end));
  }
  for (const Timeline::Kernel& kernel : timeline.kernels) {
    events.Slice(KernelName(timeline, kernel.exec_id), TimelineTrack::kCompute, kernel.begin,
                 kernel.end, Json{{"exec_id", kernel.exec_id}});
  }
}

void WriteTransfers(const Timeline& timeline, EventWriter& events) {
  Nanos lane_end[2] = {0, 0};  // when each direction's last transfer landed
  for (const Timeline::TransferMark& t : timeline.transfers) {
    const bool d2h = t.kind == TransferKind::kEviction;
    const TimelineTrack track = d2h ? TimelineTrack::kDeviceToHost : TimelineTrack::kHostToDevice;
    Json args{{"bytes", t.bytes}, {"block", Address(t.block * kBlockSize)}};
    if (t.unfinished) args["unfinished"] = true;
    if (t.kind == TransferKind::kPrefetch) {
      events.Instant("prefetch issued", TimelineTrack::kPrefetches, t.issued, args);
    }
    if (t.completed == kNever) {
      events.Instant(TransferName(t.kind), track, t.issued, args);
      continue;
    }
    // A transfer with nothing to copy (a zero-fill, a clean eviction)
    // never occupies the link.
    if (t.bytes == 0) continue;
    const Nanos start = std::min(t.completed, std::max(t.ready, lane_end[d2h]));
    lane_end[d2h] = t.completed;
    events.Slice(TransferName(t.kind), track, start, t.completed, args);
  }
}

void WriteMarks(const std::vector<Timeline::Mark>& marks, const char* name, TimelineTrack track,
                EventWriter& events) {
  for (const Timeline::Mark& mark : marks) {
    events.Instant(name, track, mark.time, Json{{"bytes", mark.bytes}, {"block", Address(mark.address)}});
  }
}

void WriteCounters(const Timeline& timeline, EventWriter& events) {
  const RunSeries& memory = timeline.memory;
  for (size_t i = 0; i < memory.resident_bytes.size(); ++i) {
    events.Counter("device memory", static_cast<Nanos>(i) * memory.interval_ns,
                   Json{{"resident", memory.resident_bytes[i]},
                        {"in_flight", memory.in_flight_bytes[i]},
                        {"prefetched_unused", memory.prefetched_unused_bytes[i]},
                        {"inactive", memory.inactive_bytes[i]}});
  }
  for (const Timeline::QueueDepth& depth : timeline.queue_depth) {
    events.Counter("queue depth", depth.time,
                   Json{{"h2d_in_flight", depth.h2d},
                        {"d2h_in_flight", depth.d2h},
                        {"prefetch_queue", depth.prefetch_queue}});
  }
}

}  // namespace

void WriteTimelineJson(const Timeline& timeline,
                       const std::vector<std::pair<std::string, std::string>>& metadata,
                       std::ostream& out) {
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":";
  Json other = Json::object();
  for (const auto& [key, value] : metadata) other[key] = value;
  if (!timeline.notes.empty()) other["notes"] = timeline.notes;
  out << JsonText(other) << ",\"traceEvents\":[";
  EventWriter events(out);
  events.Write(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", kPid},
                    {"args", Json{{"name", "umlab"}}}});
  for (int tid = 1; tid <= static_cast<int>(TimelineTrack::kFaults); ++tid) {
    events.Write(Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", kPid}, {"tid", tid},
                      {"args", Json{{"name", TrackName(static_cast<TimelineTrack>(tid))}}}});
    events.Write(Json{{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", kPid}, {"tid", tid},
                      {"args", Json{{"sort_index", tid}}}});
  }
  WriteComputeStream(timeline, events);
  for (const Timeline::FaultBatch& batch : timeline.fault_batches) {
    events.Slice("fault batch", TimelineTrack::kFaultService, batch.begin, batch.end,
                 Json{{"faults", batch.faults}, {"faulted_pages", batch.faulted_pages}});
  }
  WriteTransfers(timeline, events);
  WriteMarks(timeline.invalidations, "invalidate", TimelineTrack::kInvalidations, events);
  WriteMarks(timeline.device_evictions, "device eviction", TimelineTrack::kDeviceEvictions, events);
  for (const Timeline::Mark& fault : timeline.faults) {
    events.Instant("fault", TimelineTrack::kFaults, fault.time,
                   Json{{"kernel", KernelName(timeline, fault.exec_id)},
                        {"address", Address(fault.address)}});
  }
  WriteCounters(timeline, events);
  out << "\n]}\n";
}

}  // namespace umlab::cli
