// umlab.read_trace(path): a `.umt` trace (docs/trace-format.md) decoded by
// umlab's own TraceReader into NumPy structured arrays, one record per
// event, so Python never decodes the format. The result is a dict:
//
//   version        the trace format version
//   metadata       the header's key/value strings, in file order
//   kernel_names   {exec_id: kernel name}
//   events         every event: kind, access, cause, exec_id, sm, address,
//                  size, iteration, duration_ns, time_ns (trace-format.md's
//                  fields; a field a kind does not use is 0)
//   faults         the fault events: time_ns, address, access, exec_id, sm
//   migrations     the migrate events: time_ns, address, size, cause
//                  (0 fault, 1 prefetch)
//   evictions      the evict events (bytes written back): time_ns, address, size
//   invalidations  the invalidate events (bytes dropped): time_ns, address, size
//
// A damaged, cut-off or newer trace raises umlab.Error with the reader's
// one-line message.
#ifndef UMLAB_PYTHON_TRACE_ARRAYS_H_
#define UMLAB_PYTHON_TRACE_ARRAYS_H_

#include <string>

#include <pybind11/pybind11.h>

namespace umlab::python {

// NumPy is needed only here: it is imported on the first call, so the rest
// of the module works where NumPy is not installed.
pybind11::dict ReadTrace(const std::string& path);

// {kind byte: name}, e.g. {16: "fault"}, for the `kind` field of events.
pybind11::dict EventKindNames();

}  // namespace umlab::python

#endif  // UMLAB_PYTHON_TRACE_ARRAYS_H_
