// Rodinia's myocyte (CUDA, mode 0, the run script's `100 1 0`): one heart
// cell's 91 ordinary differential equations, integrated on the host by an
// embedded Fehlberg 7(8) solver that evaluates the model through the GPU
// at each of its 13 stages: the host copies the state (initvalu) in, the
// kernel runs, the host copies the derivatives (finavalu) out. The kernel
// has two blocks of 32 threads, and one thread of each works: block 0's
// thread 0 runs the ECC model (finavalu[0 .. 46)), block 1's runs the three
// CaM models (finavalu[46 .. 91) and com[0 .. 3)); both read initvalu and
// params. Which block stores where is decided by a branch on blockIdx.x,
// which MAPA's representative threads do not follow: MAPA sees every
// block store all of finavalu and com, so the §6.4 overlap check sends
// the kernel to one GPU, as the thesis reports for myocyte (§7.3.1).
//
// Size: the thesis lists 1 MB (Table 7.10); mode 0's device arrays are 91,
// 91, 16 and 3 fp32, under a kilobyte, which the table seems to round up.
// Launches: 13 a time step over `steps` steps (the run script's span of
// 100; the solver's own step control is not modelled). The copies between
// the launches are not modelled either (grid programs copy in before the
// first kernel and out after the last, docs/snurhac.md). Compute, **an
// assumption**: each working thread runs its model serially, 2,000
// dependent operations at 4 ns each (8 µs a launch); no roofline fits one
// thread.
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::ElementWindow;
using grid::Loop;

constexpr uint64_t kEquations = 91;       // EQUATIONS
constexpr uint64_t kParameters = 16;      // PARAMETERS
constexpr uint64_t kCamModels = 3;        // com's entries
constexpr int64_t kEccEquations = 46;     // the CaM models' valu_offset
constexpr uint64_t kStages = 13;          // Fehlberg 7(8)
constexpr Nanos kLaunchNanos = 2000 * 4;  // an assumption (see above)

absl::StatusOr<std::unique_ptr<GridProgram>> MakeMyocyte(const ParamMap& params,
                                                         const ComputeSpec&) {
  const int64_t steps = params.Int("steps");
  grid::GridProgramBuilder program(absl::StrFormat("myocyte (%d steps)", steps));
  const int initvalu = program.Array("d_initvalu", kEquations * 4, true, false);
  const int finavalu = program.Array("d_finavalu", kEquations * 4, false, true);
  const int parameters = program.Array("d_params", kParameters * 4, true, false);
  const int com = program.Array("d_com", kCamModels * 4, false, false);
  // Block 0 stores finavalu[0, 46), block 1 finavalu[46, 91).
  auto derivatives = [](const GridShare& share) {
    const int64_t first = share.first.x, last = share.first.x + share.extent.x;
    return ElementRange{first == 0 ? 0 : kEccEquations,
                        last > 1 ? static_cast<int64_t>(kEquations) : kEccEquations};
  };
  // Block 1 stores com.
  auto cam_results = [](const GridShare& share) {
    return share.first.x + share.extent.x > 1 ? ElementRange{0, static_cast<int64_t>(kCamModels)}
                                              : ElementRange{0, 0};
  };
  GridAccess store = Affine(finavalu, AccessType::kWrite, 4, 0, {Loop(1, kEquations)});
  store.touched = ElementWindow(program.array(finavalu), 4, derivatives);
  GridAccess com_store = Affine(com, AccessType::kWrite, 4, 0, {Loop(1, kCamModels)});
  com_store.touched = ElementWindow(program.array(com), 4, cam_results);
  const std::vector<GridAccess> accesses = {
      Affine(initvalu, AccessType::kRead, 4, 0, {Loop(1, kEquations)}),
      Affine(parameters, AccessType::kRead, 4, 0, {Loop(1, kParameters)}), store, com_store};
  for (int64_t launch = 0; launch < steps * static_cast<int64_t>(kStages); ++launch) {
    program.Launch("kernel", 1, grid::Blocks(2), Dim3{32, 1, 1}, kLaunchNanos, accesses);
  }
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    myocyte, {"myocyte",
              "Rodinia myocyte (mode 0): two one-thread blocks whose stores MAPA sees "
              "overlap, 13 launches a time step (1 MB in the thesis)",
              {{"scale", ParamType::kDouble, "1",
                "accepted for a uniform command line; myocyte's arrays are fixed by its model",
                ParamRange::OpenClosed(0, 1)},
               {"steps", ParamType::kInt, "100", "time steps (the run script's span: 100)",
                ParamRange::Closed(1, 100000)}},
              MakeMyocyte});

}  // namespace umlab
