// PolyBench's syrk as PolyBench/GPU runs it (syrk.cu): C = alpha A A^T +
// beta C on n x n fp32 matrices. Thread (tx, ty) of block (bx, by), blocks
// of 32 x 8, computes C[i][j] with i = 8 by + ty and j = 32 bx + tx: it
// scales C[i][j] by beta, then adds A[i][k] A[j][k] over k, reading row i
// and row j of A. Every index is affine. The grid is cut along y (rows
// i), and every share's threads span every j: every device reads all of
// A, as gemm's read all of B.
//
// Size: 512 MB in the thesis (Table 7.10): A and C, 8192 x 8192 fp32.
// Compute: 2 n^3 FLOPs at the fp32 peak (roofline).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

using grid::Affine;

constexpr double kThesisBytes = 512 * grid::kMiB;

// Row j = 32 bx + tx of A, over k.
std::vector<AffineTerm> RowOfJ(int64_t n) {
  return {grid::BlockX(grid::kPolybench2DX * n), grid::ThreadX(n),
          grid::Loop(1, static_cast<uint64_t>(n))};
}

absl::StatusOr<std::unique_ptr<GridProgram>> MakeSyrk(const ParamMap& params,
                                                      const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 2, 4, grid::kPolybench2DX);
  const int64_t side = static_cast<int64_t>(n);
  grid::GridProgramBuilder program(absl::StrFormat("syrk (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int c = program.Array("C", n * n * 4, true, true);
  program.Launch("syrk_kernel", 1, grid::Polybench2DGrid(n), grid::Polybench2DThreads(),
                 RooflineNanos(spec, 2.0 * n * n * n, 2.0 * n * n * 4),
                 {Affine(c, AccessType::kRead, 4, 0, grid::Polybench2DElement(side)),
                  Affine(a, AccessType::kRead, 4, 0, grid::Polybench2DRow(side)),
                  Affine(a, AccessType::kRead, 4, 0, RowOfJ(side)),
                  Affine(c, AccessType::kWrite, 4, 0, grid::Polybench2DElement(side))});
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(syrk, {"syrk",
                                    "PolyBench syrk: C = aAA^T + bC; every device reads all "
                                    "of A (512 MB in the thesis)",
                                    {grid::ScaleParam()},
                                    MakeSyrk});

}  // namespace umlab
