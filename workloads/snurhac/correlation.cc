// PolyBench's correlation as PolyBench/GPU runs it (correlation.cu), on an
// n x n fp32 data matrix (n observations of n variables):
//  - mean_kernel and std_kernel, one thread per column j = 256 bx + tx,
//    walk column j of the data;
//  - reduce_kernel, a 2D grid of 32 x 8 blocks, centres and scales every
//    element (i = 8 by + ty, j = 32 bx + tx);
//  - corr_kernel, one thread per variable j1 = 256 bx + tx, fills row j1
//    of the symmetric n x n result and mirrors it into column j1.
// (The shapes it shares with covariance are in polybench_kernels.h.)
// Every index is affine. corr_kernel's column stores make every device's
// write range span the whole result: the thesis's §6.4 check sends it to
// one GPU (correlation is one of the three applications it names, §7.3.1).
// The loop of j2 from j1 + 1 is taken over the whole row here (as MAPA's
// bounds would see it), which doubles the stores of a triangle.
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

absl::StatusOr<std::unique_ptr<GridProgram>> MakeCorrelation(const ParamMap& params,
                                                             const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 2, 4, grid::kPolybench1D);
  const int64_t side = static_cast<int64_t>(n);
  const double matrix_bytes = static_cast<double>(n * n * 4);
  grid::GridProgramBuilder program(absl::StrFormat("correlation (%d x %d)", n, n));
  const int data = program.Array("data", n * n * 4, true, false);
  const int symmat = program.Array("symmat", n * n * 4, false, true);
  const int mean = program.Array("mean", n * 4, false, false);
  const int stddev = program.Array("stddev", n * 4, false, false);
  const Dim3 grid_1d = grid::Polybench1DGrid(n), threads_1d = grid::Polybench1DThreads();
  const std::vector<AffineTerm> column = grid::Polybench1DColumn(side);
  const std::vector<AffineTerm> variable = grid::Polybench1DElement();
  program.Launch("mean_kernel", 1, grid_1d, threads_1d,
                 RooflineNanos(spec, 1.0 * n * n, matrix_bytes),
                 {Affine(data, AccessType::kRead, 4, 0, column),
                  Affine(mean, AccessType::kWrite, 4, 0, variable)});
  program.Launch("std_kernel", 2, grid_1d, threads_1d,
                 RooflineNanos(spec, 3.0 * n * n, matrix_bytes),
                 {Affine(data, AccessType::kRead, 4, 0, column),
                  Affine(mean, AccessType::kRead, 4, 0, variable),
                  Affine(stddev, AccessType::kWrite, 4, 0, variable)});
  // data[i][j] -= mean[j], /= stddev[j].
  const std::vector<AffineTerm> element = grid::Polybench2DElement(side);
  const std::vector<AffineTerm> element_column = {grid::BlockX(grid::kPolybench2DX),
                                                  grid::ThreadX(1)};
  program.Launch("reduce_kernel", 3, grid::Polybench2DGrid(n), grid::Polybench2DThreads(),
                 RooflineNanos(spec, 3.0 * n * n, 2 * matrix_bytes),
                 {Affine(mean, AccessType::kRead, 4, 0, element_column),
                  Affine(stddev, AccessType::kRead, 4, 0, element_column),
                  Affine(data, AccessType::kRead, 4, 0, element),
                  Affine(data, AccessType::kWrite, 4, 0, element)});
  program.Launch("corr_kernel", 4, grid_1d, threads_1d,
                 RooflineNanos(spec, 1.0 * n * n * n, 2 * matrix_bytes),
                 grid::SymmetricProductAccesses(data, symmat, side));
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    correlation, {"correlation",
                  "PolyBench correlation: column statistics, then a symmetric result whose "
                  "mirrored stores every device shares (128 MB in the thesis)",
                  {grid::ScaleParam()},
                  MakeCorrelation});

}  // namespace umlab
