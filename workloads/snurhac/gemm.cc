// PolyBench's gemm as its CUDA version (PolyBench/GPU, gemm.cu) runs it:
// C = alpha A B + beta C on n x n fp32 matrices, one matrix product kernel
// (polybench_kernels.h: blocks of 32 x 8 threads, thread (tx, ty) of block
// (bx, by) computes C[8 by + ty][32 bx + tx]). Every index is affine, so
// MAPA sees all of them. A row of blocks needs a band of A and C but all
// of B: the thesis's reason gemm scales poorly (§7.3.2).
//
// Size: the thesis ran it at 3072 MB (Table 7.10): three 16384 x 16384
// fp32 matrices. Compute: 2 n^3 FLOPs at the device's fp32 peak (roofline).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/polybench_kernels.h"

namespace umlab {
namespace {

constexpr double kThesisBytes = 3072 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeGemm(const ParamMap& params,
                                                      const ComputeSpec& spec) {
  const uint64_t n =
      grid::SquareSide(kThesisBytes * params.Double("scale"), 3, 4, grid::kPolybench2DX);
  grid::GridProgramBuilder program(absl::StrFormat("gemm (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int b = program.Array("B", n * n * 4, true, false);
  const int c = program.Array("C", n * n * 4, true, true);
  grid::MatrixProduct(program, "gemm_kernel", 1, n, a, b, c, spec);
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(gemm, {"gemm",
                                    "PolyBench gemm: C = aAB + bC, every index affine; every "
                                    "device needs all of B (3072 MB in the thesis)",
                                    {grid::ScaleParam()},
                                    MakeGemm});

}  // namespace umlab
