// What this build offers, by name, with each one's parameters and defaults:
// the lists `umlab policies`, `workloads`, `devices` and `backends` print,
// as JSON values for scripts (the Python module's umlab.policies() and its
// siblings). Each is a list, in name order, of
//   {"name", "description", "params": [{"name", "type", "default", "help",
//                                       "range"?, "choices"?}]}
// where "range" ("[1, 64]") appears for a bounded number and "choices" for a
// string limited to some values; a device's defaults are its preset values.
#ifndef UMLAB_CLI_CATALOG_H_
#define UMLAB_CLI_CATALOG_H_

#include "cli/json_text.h"

namespace umlab::cli {

Json PolicyCatalog();
Json WorkloadCatalog();
Json DeviceCatalog();
Json BackendCatalog();

}  // namespace umlab::cli

#endif  // UMLAB_CLI_CATALOG_H_
