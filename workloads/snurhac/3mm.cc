// PolyBench's 3mm as PolyBench/GPU runs it (3mm.cu): three matrix products
// on n x n fp32 matrices, mm3_kernel1 E = A B, mm3_kernel2 F = C D and
// mm3_kernel3 G = E F, each the matrix product shape of
// polybench_kernels.h. Every index is affine; every device reads all of
// each right-hand matrix (B, D, F), so 3mm scales poorly like gemm
// (§7.3.2). mm3Cuda copies all seven arrays in and G out.
//
// Size: 1792 MB in the thesis (Table 7.10): seven 8192 x 8192 fp32
// matrices. Compute: 2 n^3 FLOPs per product at the fp32 peak (roofline).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

constexpr double kThesisBytes = 1792 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> Make3mm(const ParamMap& params,
                                                     const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 7, 4, grid::kPolybench2DX);
  grid::GridProgramBuilder program(absl::StrFormat("3mm (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int b = program.Array("B", n * n * 4, true, false);
  const int c = program.Array("C", n * n * 4, true, false);
  const int d = program.Array("D", n * n * 4, true, false);
  const int e = program.Array("E", n * n * 4, true, false);
  const int f = program.Array("F", n * n * 4, true, false);
  const int g = program.Array("G", n * n * 4, true, true);
  grid::MatrixProduct(program, "mm3_kernel1", 1, n, a, b, e, spec);
  grid::MatrixProduct(program, "mm3_kernel2", 2, n, c, d, f, spec);
  grid::MatrixProduct(program, "mm3_kernel3", 3, n, e, f, g, spec);
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(three_mm, {"3mm",
                                        "PolyBench 3mm: E = AB, F = CD, G = EF; every device "
                                        "needs all of B, D and F (1792 MB in the thesis)",
                                        {grid::ScaleParam()},
                                        Make3mm});

}  // namespace umlab
