#include "python/trace_arrays.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>

#include "core/event.h"
#include "core/trace_reader.h"
#include "python/error.h"

namespace umlab::python {
namespace {

namespace py = pybind11;

// Plain records, so NumPy can view them as structured dtypes.
struct EventRecord {
  uint8_t kind;
  uint8_t access;
  uint8_t cause;
  uint32_t exec_id;
  uint32_t sm;
  uint64_t address;
  uint64_t size;
  uint64_t iteration;
  int64_t duration_ns;
  int64_t time_ns;
  uint32_t rereads;
  uint64_t host_address;
};

struct FaultRecord {
  int64_t time_ns;
  uint64_t address;
  uint8_t access;
  uint32_t exec_id;
  uint32_t sm;
};

struct MigrationRecord {
  int64_t time_ns;
  uint64_t address;
  uint64_t size;
  uint8_t cause;
};

// Evictions and invalidations: a range leaving the device.
struct RemovalRecord {
  int64_t time_ns;
  uint64_t address;
  uint64_t size;
};

struct DecodedTrace {
  uint32_t version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::pair<uint32_t, std::string>> kernel_names;
  std::vector<EventRecord> events;
  std::vector<FaultRecord> faults;
  std::vector<MigrationRecord> migrations;
  std::vector<RemovalRecord> evictions;
  std::vector<RemovalRecord> invalidations;
};

// Runs without the GIL: touches no Python object.
absl::StatusOr<DecodedTrace> Decode(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TraceReader>> reader = TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  DecodedTrace trace;
  trace.version = (*reader)->version();
  trace.metadata = (*reader)->metadata();
  Event e;
  while ((*reader)->Next(e)) {
    trace.events.push_back(EventRecord{static_cast<uint8_t>(e.kind),
                                       static_cast<uint8_t>(e.access), e.cause, e.exec_id, e.sm,
                                       e.address, e.size, e.iteration, e.duration_ns, e.time_ns,
                                       e.rereads, e.host_address});
    switch (e.kind) {
      case EventKind::kKernelDefine: trace.kernel_names.emplace_back(e.exec_id, e.name); break;
      case EventKind::kFault:
        trace.faults.push_back(
            FaultRecord{e.time_ns, e.address, static_cast<uint8_t>(e.access), e.exec_id, e.sm});
        break;
      case EventKind::kMigrate:
        trace.migrations.push_back(MigrationRecord{e.time_ns, e.address, e.size, e.cause});
        break;
      case EventKind::kEvict:
        trace.evictions.push_back(RemovalRecord{e.time_ns, e.address, e.size});
        break;
      case EventKind::kInvalidate:
        trace.invalidations.push_back(RemovalRecord{e.time_ns, e.address, e.size});
        break;
      default: break;
    }
  }
  if (!(*reader)->status().ok()) return (*reader)->status();
  return trace;
}

template <typename Record>
py::array_t<Record> ToArray(const std::vector<Record>& records) {
  py::array_t<Record> array(static_cast<py::ssize_t>(records.size()));
  if (!records.empty()) {
    std::memcpy(array.mutable_data(), records.data(), records.size() * sizeof(Record));
  }
  return array;
}

// Registers the records with NumPy (importing it), once; called with the GIL.
void DefineRecordTypes() {
  static const bool defined = [] {
    PYBIND11_NUMPY_DTYPE(EventRecord, kind, access, cause, exec_id, sm, address, size,
                         iteration, duration_ns, time_ns, rereads, host_address);
    PYBIND11_NUMPY_DTYPE(FaultRecord, time_ns, address, access, exec_id, sm);
    PYBIND11_NUMPY_DTYPE(MigrationRecord, time_ns, address, size, cause);
    PYBIND11_NUMPY_DTYPE(RemovalRecord, time_ns, address, size);
    return true;
  }();
  (void)defined;
}

}  // namespace

py::dict ReadTrace(const std::string& path) {
  DefineRecordTypes();
  absl::StatusOr<DecodedTrace> trace;
  {
    py::gil_scoped_release released;
    trace = Decode(path);
  }
  if (!trace.ok()) throw Error(std::string(trace.status().message()));
  py::dict metadata;
  for (const auto& [key, value] : trace->metadata) metadata[py::str(key)] = value;
  py::dict kernel_names;
  for (const auto& [exec_id, name] : trace->kernel_names) kernel_names[py::int_(exec_id)] = name;
  py::dict out;
  out["version"] = trace->version;
  out["metadata"] = metadata;
  out["kernel_names"] = kernel_names;
  out["events"] = ToArray(trace->events);
  out["faults"] = ToArray(trace->faults);
  out["migrations"] = ToArray(trace->migrations);
  out["evictions"] = ToArray(trace->evictions);
  out["invalidations"] = ToArray(trace->invalidations);
  return out;
}

py::dict EventKindNames() {
  py::dict names;
  for (int byte = 0; byte < 256; ++byte) {
    const char* name = EventKindName(static_cast<EventKind>(byte));
    if (std::strcmp(name, "unknown") != 0) names[py::int_(byte)] = name;
  }
  return names;
}

}  // namespace umlab::python
