// PolyBench's 2mm as PolyBench/GPU runs it (2mm.cu): two matrix products
// on n x n fp32 matrices, mm2_kernel1 C = A B and then mm2_kernel2
// E = C D, each the matrix product shape of polybench_kernels.h (blocks of
// 32 x 8, out[i][j] += over row i and column j). Every index is affine.
// Like gemm, each row of blocks needs the whole right-hand matrix (B, then
// D), so every device reads all of it: the thesis's reason 2mm scales
// poorly (§7.3.2). mm2Cuda copies all five arrays in and E out.
//
// Size: 1280 MB in the thesis (Table 7.10): five 8192 x 8192 fp32
// matrices. Compute: 2 n^3 FLOPs per product at the fp32 peak (roofline).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

constexpr double kThesisBytes = 1280 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> Make2mm(const ParamMap& params,
                                                     const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 5, 4, grid::kPolybench2DX);
  grid::GridProgramBuilder program(absl::StrFormat("2mm (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int b = program.Array("B", n * n * 4, true, false);
  const int c = program.Array("C", n * n * 4, true, false);
  const int d = program.Array("D", n * n * 4, true, false);
  const int e = program.Array("E", n * n * 4, true, true);
  grid::MatrixProduct(program, "mm2_kernel1", 1, n, a, b, c, spec);
  grid::MatrixProduct(program, "mm2_kernel2", 2, n, c, d, e, spec);
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(two_mm, {"2mm",
                                      "PolyBench 2mm: C = AB, E = CD; every device needs all "
                                      "of B and D (1280 MB in the thesis)",
                                      {grid::ScaleParam()},
                                      Make2mm});

}  // namespace umlab
