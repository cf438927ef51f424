// Compiles: a policy-layer file may include core. The control for
// policy_includes_backend.cc, so that test fails for the include alone.
#include "core/policy.h"

int umlab_layering_probe_core() { return 0; }
