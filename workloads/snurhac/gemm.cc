// PolyBench's gemm as its CUDA version (PolyBench/GPU, gemm.cu) runs it:
// C = alpha A B + beta C on n x n fp32 matrices. Thread (tx, ty) of block
// (bx, by), blocks of 32 x 8 threads, computes C[i][j] with i = 8 by + ty
// and j = 32 bx + tx, looping k over A's row i and B's column j. Every
// index is affine, so MAPA sees all of them. A row of blocks needs a band
// of A and C but all of B: the thesis's reason gemm scales poorly (§7.3.2).
//
// Size: the thesis ran it at 3072 MB (Table 7.10): three 16384 x 16384
// fp32 matrices. Compute: 2 n^3 FLOPs at the device's fp32 peak (roofline).
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

constexpr uint32_t kBlockX = 32, kBlockY = 8;  // gemm.cu's DIM_THREAD_BLOCK_X/Y
constexpr double kThesisBytes = 3072 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeGemm(const ParamMap& params,
                                                      const ComputeSpec& spec) {
  const uint64_t n = grid::SquareSide(kThesisBytes * params.Double("scale"), 3, 4, kBlockX);
  const int64_t side = static_cast<int64_t>(n);
  auto program = std::make_unique<GridProgram>();
  program->name = absl::StrFormat("gemm (n = %d)", n);
  GridArrayLayout layout(*program);
  const int a = layout.Add("A", n * n * 4, true, false);
  const int b = layout.Add("B", n * n * 4, true, false);
  const int c = layout.Add("C", n * n * 4, true, true);
  GridKernel kernel;
  kernel.name = "gemm_kernel";
  kernel.exec_id = 1;
  kernel.grid = Dim3{static_cast<uint32_t>(n / kBlockX), static_cast<uint32_t>(n / kBlockY), 1};
  kernel.threads = Dim3{kBlockX, kBlockY, 1};
  const double matrix_bytes = static_cast<double>(n * n * 4);
  kernel.compute_ns = RooflineNanos(spec, 2.0 * n * n * n, 3 * matrix_bytes);
  // C[i][j] = i n + j: i = 8 by + ty, j = 32 bx + tx.
  const std::vector<AffineTerm> c_index = {BlockY(kBlockY * side), ThreadY(side), BlockX(kBlockX),
                                           ThreadX(1)};
  kernel.accesses = {
      Affine(c, AccessType::kRead, 4, 0, c_index),
      // A[i][k] = i n + k.
      Affine(a, AccessType::kRead, 4, 0, {BlockY(kBlockY * side), ThreadY(side), Loop(1, n)}),
      // B[k][j] = k n + j.
      Affine(b, AccessType::kRead, 4, 0, {Loop(side, n), BlockX(kBlockX), ThreadX(1)}),
      Affine(c, AccessType::kWrite, 4, 0, c_index),
  };
  program->launches.push_back(std::move(kernel));
  return program;
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(gemm, {"gemm",
                                    "PolyBench gemm: C = aAB + bC, every index affine; every "
                                    "device needs all of B (3072 MB in the thesis)",
                                    {grid::ScaleParam()},
                                    MakeGemm});

}  // namespace umlab
