// Parboil's sgemm (cuda version, sgemm_kernel.cu's mysgemmNT): C = alpha A
// B^T + beta C in column-major fp32, A m x k (lda = m), B n x k (ldb = n),
// C m x n (ldc = m). Blocks of TILE_N x TILE_TB_HEIGHT = 16 x 8 threads
// cover TILE_M = 128 rows by TILE_N = 16 columns of C: thread (tx, ty) of
// block (bx, by) owns row m = 128 bx + 16 ty + tx and loops i over k,
// reading A[m + i lda]; the block stages B[n + tx + (i + ty) ldb], n = 16
// by, eight rows of k at a time, and the thread stores C[m + (n + j) ldc]
// for j < 16. Every index is affine. The grid is cut along y (columns of
// C), and every share reads all of A: the thesis's reason sgemm scales
// poorly (§7.3.2).
//
// Size: 3224 MB in the thesis (Table 7.10). The shape is an assumption:
// Parboil's medium input (m, n, k = 1024, 1056, 992) scaled alike until
// the three matrices fill 3224 MB, m rounded to 128 and n to 16.
// Compute: 2 m n k FLOPs at the fp32 peak (roofline).
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;
using grid::BlockY;
using grid::Loop;
using grid::ThreadX;
using grid::ThreadY;

constexpr uint32_t kTileN = 16, kTileHeight = 8, kTileM = kTileN * kTileHeight;
constexpr double kThesisBytes = 3224 * grid::kMiB;
constexpr double kMediumM = 1024, kMediumN = 1056, kMediumK = 992;  // Parboil's medium

uint64_t RoundTo(double value, uint64_t multiple) {
  const uint64_t rounded = static_cast<uint64_t>(value) / multiple * multiple;
  return rounded < multiple ? multiple : rounded;
}

absl::StatusOr<std::unique_ptr<GridProgram>> MakeSgemm(const ParamMap& params,
                                                       const ComputeSpec& spec) {
  const double medium_elements = kMediumM * kMediumK + kMediumN * kMediumK + kMediumM * kMediumN;
  const double factor = std::sqrt(kThesisBytes * params.Double("scale") / (4 * medium_elements));
  const uint64_t m = RoundTo(kMediumM * factor, kTileM);
  const uint64_t n = RoundTo(kMediumN * factor, kTileN);
  const uint64_t k = RoundTo(kMediumK * factor, kTileHeight);
  const int64_t lda = static_cast<int64_t>(m), ldb = static_cast<int64_t>(n);
  grid::GridProgramBuilder program(absl::StrFormat("sgemm (m = %d, n = %d, k = %d)", m, n, k));
  const int a = program.Array("A", m * k * 4, true, false);
  const int b = program.Array("B", n * k * 4, true, false);
  const int c = program.Array("C", m * n * 4, true, true);
  // C[m + (n + j) ldc]: m = 128 bx + 16 ty + tx, n = 16 by, j < 16.
  const std::vector<AffineTerm> c_index = {BlockX(kTileM), ThreadY(kTileN), ThreadX(1),
                                           BlockY(kTileN * lda), Loop(lda, kTileN)};
  program.Launch(
      "mysgemmNT", 1, grid::Blocks(m / kTileM, n / kTileN), Dim3{kTileN, kTileHeight, 1},
      RooflineNanos(spec, 2.0 * m * n * k, 4.0 * (m * k + n * k + m * n)),
      {Affine(a, AccessType::kRead, 4, 0,
              {BlockX(kTileM), ThreadY(kTileN), ThreadX(1), Loop(lda, k)}),
       Affine(b, AccessType::kRead, 4, 0,
              {BlockY(kTileN), ThreadX(1), ThreadY(ldb), Loop(kTileHeight * ldb, k / kTileHeight)}),
       Affine(c, AccessType::kRead, 4, 0, c_index), Affine(c, AccessType::kWrite, 4, 0, c_index)});
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(sgemm, {"sgemm",
                                     "Parboil sgemm: C = aAB^T + bC in tiles of 128 x 16; "
                                     "every device reads all of A (3224 MB in the thesis)",
                                     {grid::ScaleParam()},
                                     MakeSgemm});

}  // namespace umlab
