// Must not compile: a file that links only what a policy links (umlab_core)
// includes a backend header. tests/CMakeLists.txt expects this build to fail
// with the header not found.
#include "core/policy.h"
#include "backends/emu/sim_backend.h"

int umlab_layering_probe_backend() { return 0; }
