// PolyBench's syr2k as PolyBench/GPU runs it (syr2k.cu): C = alpha A B^T +
// alpha B A^T + beta C on n x n fp32 matrices. Thread (tx, ty) of block
// (bx, by), blocks of 32 x 8, computes C[i][j] with i = 8 by + ty and
// j = 32 bx + tx, reading rows i and j of both A and B over k. Every index
// is affine; cut along rows i, every share still reads all of A and B
// through the rows j.
//
// Size: 768 MB in the thesis (Table 7.10): A, B and C, 8192 x 8192 fp32.
// Compute: 4 n^3 FLOPs at the fp32 peak (roofline).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

using grid::Affine;

constexpr double kThesisBytes = 768 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeSyr2k(const ParamMap& params,
                                                       const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 3, 4, grid::kPolybench2DX);
  const int64_t side = static_cast<int64_t>(n);
  grid::GridProgramBuilder program(absl::StrFormat("syr2k (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int b = program.Array("B", n * n * 4, true, false);
  const int c = program.Array("C", n * n * 4, true, true);
  // Row j = 32 bx + tx, over k.
  const std::vector<AffineTerm> row_j = {grid::BlockX(grid::kPolybench2DX * side),
                                         grid::ThreadX(side), grid::Loop(1, n)};
  program.Launch("syr2k_kernel", 1, grid::Polybench2DGrid(n), grid::Polybench2DThreads(),
                 RooflineNanos(spec, 4.0 * n * n * n, 3.0 * n * n * 4),
                 {Affine(c, AccessType::kRead, 4, 0, grid::Polybench2DElement(side)),
                  Affine(a, AccessType::kRead, 4, 0, grid::Polybench2DRow(side)),
                  Affine(b, AccessType::kRead, 4, 0, row_j),
                  Affine(b, AccessType::kRead, 4, 0, grid::Polybench2DRow(side)),
                  Affine(a, AccessType::kRead, 4, 0, row_j),
                  Affine(c, AccessType::kWrite, 4, 0, grid::Polybench2DElement(side))});
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(syr2k, {"syr2k",
                                     "PolyBench syr2k: C = aAB^T + aBA^T + bC; every device "
                                     "reads all of A and B (768 MB in the thesis)",
                                     {grid::ScaleParam()},
                                     MakeSyr2k});

}  // namespace umlab
