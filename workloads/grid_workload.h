// Grid programs by name (core/grid_program.h): programs whose kernels carry
// their grids and per-access descriptions, for SnuRHAC's cluster runs
// (`umlab snurhac`). Generators register themselves as workloads do.
#ifndef UMLAB_WORKLOADS_GRID_WORKLOAD_H_
#define UMLAB_WORKLOADS_GRID_WORKLOAD_H_

#include "core/compute_spec.h"
#include "core/grid_program.h"
#include "core/registry.h"

namespace umlab {

using GridWorkloadRegistry = Registry<GridProgram, const ComputeSpec&>;

// The process-wide registry every grid-program generator adds itself to.
GridWorkloadRegistry& GridWorkloads();

}  // namespace umlab

// Registers a grid program from a source file's static initialisation:
//   UMLAB_REGISTER_GRID_WORKLOAD(gemm, {"gemm", "description", {params...}, factory});
#define UMLAB_REGISTER_GRID_WORKLOAD(id, ...)                              \
  [[maybe_unused]] static const bool umlab_grid_workload_registered_##id = \
      ::umlab::GridWorkloads().Register(__VA_ARGS__)

#endif  // UMLAB_WORKLOADS_GRID_WORKLOAD_H_
