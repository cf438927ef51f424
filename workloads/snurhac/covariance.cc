// PolyBench's covariance as PolyBench/GPU runs it (covariance.cu), on an
// n x n fp32 data matrix: mean_kernel (one thread per column j walks it),
// reduce_kernel (a 2D grid centres every element by its column's mean) and
// covar_kernel (thread j1 fills row j1 of the symmetric result and
// mirrors it into column j1). Correlation's shapes without its standard
// deviation (polybench_kernels.h). Every index is affine; the mirrored
// stores make every device's write range span the whole result, so the
// §6.4 check sends covar_kernel to one GPU: covariance is one of the three
// applications the thesis names (§7.3.1).
//
// Size: 128 MB in the thesis (Table 7.10): data and result, 4096 x 4096
// fp32 each. Compute: the roofline over each kernel's FLOPs and bytes.
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

using grid::Affine;

constexpr double kThesisBytes = 128 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeCovariance(const ParamMap& params,
                                                            const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 2, 4, grid::kPolybench1D);
  const int64_t side = static_cast<int64_t>(n);
  const double matrix_bytes = static_cast<double>(n * n * 4);
  grid::GridProgramBuilder program(absl::StrFormat("covariance (%d x %d)", n, n));
  const int data = program.Array("data", n * n * 4, true, false);
  const int symmat = program.Array("symmat", n * n * 4, false, true);
  const int mean = program.Array("mean", n * 4, false, false);
  program.Launch("mean_kernel", 1, grid::Polybench1DGrid(n), grid::Polybench1DThreads(),
                 RooflineNanos(spec, 1.0 * n * n, matrix_bytes),
                 {Affine(data, AccessType::kRead, 4, 0, grid::Polybench1DColumn(side)),
                  Affine(mean, AccessType::kWrite, 4, 0, grid::Polybench1DElement())});
  // data[i][j] -= mean[j].
  const std::vector<AffineTerm> element = grid::Polybench2DElement(side);
  program.Launch(
      "reduce_kernel", 2, grid::Polybench2DGrid(n), grid::Polybench2DThreads(),
      RooflineNanos(spec, 1.0 * n * n, 2 * matrix_bytes),
      {Affine(mean, AccessType::kRead, 4, 0, {grid::BlockX(grid::kPolybench2DX), grid::ThreadX(1)}),
       Affine(data, AccessType::kRead, 4, 0, element),
       Affine(data, AccessType::kWrite, 4, 0, element)});
  program.Launch("covar_kernel", 3, grid::Polybench1DGrid(n), grid::Polybench1DThreads(),
                 RooflineNanos(spec, 1.0 * n * n * n, 2 * matrix_bytes),
                 grid::SymmetricProductAccesses(data, symmat, side));
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    covariance, {"covariance",
                 "PolyBench covariance: column means, then a symmetric result whose mirrored "
                 "stores every device shares (128 MB in the thesis)",
                 {grid::ScaleParam()},
                 MakeCovariance});

}  // namespace umlab
