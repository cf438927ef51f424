// What this build offers, by name, with each one's parameters and defaults:
// the lists `umlab policies`, `workloads`, `devices` and `backends` print,
// as JSON values for the Python module's umlab.policies() and its siblings.
// Here rather than in cli/ because nothing else uses it, so the builds
// without the module (the sanitized ones) do not compile it. Each is a list, in name order, of
//   {"name", "description", "params": [{"name", "type", "default", "help",
//                                       "range"?, "choices"?}]}
// where "range" ("[1, 64]") appears for a bounded number and "choices" for a
// string limited to some values; a device's defaults are its preset values.
#ifndef UMLAB_PYTHON_CATALOG_H_
#define UMLAB_PYTHON_CATALOG_H_

#include "cli/json_text.h"

namespace umlab::python {

cli::Json PolicyCatalog();
cli::Json WorkloadCatalog();
cli::Json DeviceCatalog();
cli::Json BackendCatalog();

}  // namespace umlab::python

#endif  // UMLAB_PYTHON_CATALOG_H_
