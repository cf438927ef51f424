// The native half of the `umlab` Python module (python/umlab/__init__.py is
// the other): umlab's own commands run in-process, and their JSON, which the
// CLI's one writer produced, turned into Python values. Nothing here writes
// or re-derives a result: run and compare are `umlab run|compare
// --format=json` (cli/commands.h), so a dict equals the documented contract
// (docs/json-contract.md) key for key.
#include <sstream>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/ascii.h"
#include "cli/commands.h"
#include "cli/json_contract.h"
#include "cli/json_text.h"
#include "core/trace_format.h"
#include "python/catalog.h"
#include "python/error.h"
#include "python/trace_arrays.h"

namespace umlab::python {
namespace {

namespace py = pybind11;
using cli::Json;

// A JSON value as the Python value json.loads would give (dicts keep the
// document's key order).
py::object ToPython(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: {
      py::dict out;
      for (auto it = value.begin(); it != value.end(); ++it) {
        out[py::str(it.key())] = ToPython(*it);
      }
      return out;
    }
    case Json::value_t::array: {
      py::list out;
      for (const Json& item : value) out.append(ToPython(item));
      return out;
    }
    case Json::value_t::string: return py::str(value.get_ref<const std::string&>());
    case Json::value_t::boolean: return py::bool_(value.get<bool>());
    case Json::value_t::number_integer: return py::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned: return py::int_(value.get<uint64_t>());
    case Json::value_t::number_float: return py::float_(value.get<double>());
    default: return py::none();
  }
}

// `umlab ARGS...` in-process; its stdout on success, umlab.Error with the
// CLI's one-line message (as it would print it) on failure.
std::string RunCommand(const std::vector<std::string>& args) {
  if (args.empty()) throw Error("umlab: no command given; see 'umlab --help'");
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release released;  // a long run does not hold up other Python threads
    code = cli::Main(args, out, err, /*err_columns=*/0);
  }
  if (code != cli::kExitOk) {
    std::string message(absl::StripAsciiWhitespace(err.str()));
    if (message.empty()) {
      message = "umlab " + args.front() + " failed (exit " + std::to_string(code) + ")";
    }
    throw Error(message);
  }
  return out.str();
}

// A command that prints umlab JSON, as Python values; the document is
// checked against this module's contract version like any reader's.
py::object JsonCommand(const std::vector<std::string>& args) {
  const std::string text = RunCommand(args);
  const Json document = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string source = "the output of umlab " + args.front();
  if (document.is_discarded()) throw Error(source + " is not JSON");
  if (absl::Status version = cli::CheckJsonContractVersion(document, source); !version.ok()) {
    throw Error(std::string(version.message()));
  }
  return ToPython(document);
}

}  // namespace
}  // namespace umlab::python

PYBIND11_MODULE(_umlab, m) {
  namespace py = pybind11;
  namespace cli = umlab::cli;
  using namespace umlab::python;  // NOLINT: the functions this file defines
  m.doc() = "umlab's native part; use the `umlab` package.";
  py::register_exception<umlab::python::Error>(m, "Error", PyExc_RuntimeError);
  m.def("json_command", &JsonCommand, py::arg("args"),
        "Runs `umlab ARGS...` (which must print JSON) and returns the document.");
  m.def("command", &RunCommand, py::arg("args"), "Runs `umlab ARGS...` and returns its stdout.");
  m.def("policies", [] { return ToPython(PolicyCatalog()); });
  m.def("workloads", [] { return ToPython(WorkloadCatalog()); });
  m.def("devices", [] { return ToPython(DeviceCatalog()); });
  m.def("backends", [] { return ToPython(BackendCatalog()); });
  m.def("read_trace", &ReadTrace, py::arg("path"));
  m.def("event_kinds", &EventKindNames);
  m.attr("CONTRACT_VERSION") = cli::JsonContractVersion();
  // The .umt format this module writes and reads up to (docs/trace-format.md).
  m.attr("TRACE_VERSION") = umlab::kTraceVersion;
}
