// PolyBench's correlation as PolyBench/GPU runs it (correlation.cu), on an
// n x n fp32 data matrix (n observations of n variables):
//  - mean_kernel and std_kernel, one thread per column j = 256 bx + tx,
//    walk column j of the data;
//  - reduce_kernel, a 2D grid of 32 x 8 blocks, centres and scales every
//    element (i = 8 by + ty, j = 32 bx + tx);
//  - corr_kernel, one thread per variable j1 = 256 bx + tx, fills row j1
//    of the symmetric n x n result and mirrors it into column j1.
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
#include "workloads/snurhac/grid_access.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;
using grid::BlockY;
using grid::Loop;
using grid::ThreadX;
using grid::ThreadY;

constexpr uint32_t kBlock1D = 256;                 // DIM_THREAD_BLOCK_KERNEL_{1,2,4}_X
constexpr uint32_t kBlock2DX = 32, kBlock2DY = 8;  // DIM_THREAD_BLOCK_KERNEL_3_X/Y
constexpr double kThesisBytes = 128 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeCorrelation(const ParamMap& params,
                                                             const ComputeSpec& spec) {
  const uint64_t n = grid::SquareSide(kThesisBytes * params.Double("scale"), 2, 4, kBlock1D);
  const int64_t side = static_cast<int64_t>(n);
  const double matrix_bytes = static_cast<double>(n * n * 4);
  auto program = std::make_unique<GridProgram>();
  program->name = absl::StrFormat("correlation (%d x %d)", n, n);
  GridArrayLayout layout(*program);
  const int data = layout.Add("data", n * n * 4, true, false);
  const int symmat = layout.Add("symmat", n * n * 4, false, true);
  const int mean = layout.Add("mean", n * 4, false, false);
  const int stddev = layout.Add("stddev", n * 4, false, false);
  const Dim3 grid_1d{static_cast<uint32_t>(n / kBlock1D), 1, 1};
  const Dim3 threads_1d{kBlock1D, 1, 1};
  // Column j of the data: i n + j, j = 256 bx + tx.
  const std::vector<AffineTerm> column = {Loop(side, n), BlockX(kBlock1D), ThreadX(1)};
  const std::vector<AffineTerm> variable = {BlockX(kBlock1D), ThreadX(1)};

  GridKernel mean_kernel{
      "mean_kernel", 1, grid_1d, threads_1d, RooflineNanos(spec, 1.0 * n * n, matrix_bytes), {}};
  mean_kernel.accesses = {Affine(data, AccessType::kRead, 4, 0, column),
                          Affine(mean, AccessType::kWrite, 4, 0, variable)};
  GridKernel std_kernel{
      "std_kernel", 2, grid_1d, threads_1d, RooflineNanos(spec, 3.0 * n * n, matrix_bytes), {}};
  std_kernel.accesses = {Affine(data, AccessType::kRead, 4, 0, column),
                         Affine(mean, AccessType::kRead, 4, 0, variable),
                         Affine(stddev, AccessType::kWrite, 4, 0, variable)};
  GridKernel reduce_kernel{
      "reduce_kernel",
      3,
      Dim3{static_cast<uint32_t>(n / kBlock2DX), static_cast<uint32_t>(n / kBlock2DY), 1},
      Dim3{kBlock2DX, kBlock2DY, 1},
      RooflineNanos(spec, 3.0 * n * n, 2 * matrix_bytes),
      {}};
  // data[i][j], i = 8 by + ty, j = 32 bx + tx.
  const std::vector<AffineTerm> element = {BlockY(kBlock2DY * side), ThreadY(side),
                                           BlockX(kBlock2DX), ThreadX(1)};
  const std::vector<AffineTerm> element_column = {BlockX(kBlock2DX), ThreadX(1)};
  reduce_kernel.accesses = {Affine(mean, AccessType::kRead, 4, 0, element_column),
                            Affine(stddev, AccessType::kRead, 4, 0, element_column),
                            Affine(data, AccessType::kRead, 4, 0, element),
                            Affine(data, AccessType::kWrite, 4, 0, element)};
  GridKernel corr_kernel{"corr_kernel",
                         4,
                         grid_1d,
                         threads_1d,
                         RooflineNanos(spec, 1.0 * n * n * n, 2 * matrix_bytes),
                         {}};
  corr_kernel.accesses = {
      // data[i][j1] and data[i][j2] over every i and j2.
      Affine(data, AccessType::kRead, 4, 0, {Loop(side, n), Loop(1, n)}),
      // symmat[j1][j2]: row j1.
      Affine(symmat, AccessType::kWrite, 4, 0,
             {BlockX(kBlock1D * side), ThreadX(side), Loop(1, n)}),
      // symmat[j2][j1]: column j1.
      Affine(symmat, AccessType::kWrite, 4, 0, {Loop(side, n), BlockX(kBlock1D), ThreadX(1)}),
  };
  program->launches = {mean_kernel, std_kernel, reduce_kernel, corr_kernel};
  return program;
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    correlation, {"correlation",
                  "PolyBench correlation: column statistics, then a symmetric result whose "
                  "mirrored stores every device shares (128 MB in the thesis)",
                  {grid::ScaleParam()},
                  MakeCorrelation});

}  // namespace umlab
