// PolyBench's gesummv as PolyBench/GPU runs it (gesummv.cu): y = alpha A x
// + beta B x on n x n fp32 matrices. One thread per row i = 256 bx + tx
// walks row i of A and of B and all of x. Every index is affine. It moves
// much and computes little: the thesis's example of an application whose
// memory copies dominate (§7.3.2, Figure 7.10).
//
// Size: 8192 MB in the thesis (Table 7.10): two 32768 x 32768 fp32
// matrices and three vectors. Compute: the roofline over 4 n^2 FLOPs and
// the matrices' bytes.
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;
using grid::Loop;
using grid::ThreadX;

constexpr uint32_t kBlock = 256;  // gesummv.cu's DIM_THREAD_BLOCK_X
constexpr double kThesisBytes = 8192 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeGesummv(const ParamMap& params,
                                                         const ComputeSpec& spec) {
  const uint64_t n = grid::SquareSide(kThesisBytes * params.Double("scale"), 2, 4, kBlock);
  const int64_t side = static_cast<int64_t>(n);
  grid::GridProgramBuilder program(absl::StrFormat("gesummv (n = %d)", n));
  const int a = program.Array("A", n * n * 4, true, false);
  const int b = program.Array("B", n * n * 4, true, false);
  const int x = program.Array("x", n * 4, true, false);
  const int y = program.Array("y", n * 4, true, true);
  const int tmp = program.Array("tmp", n * 4, true, false);
  // Row i of a matrix: i n + j, i = 256 bx + tx.
  const std::vector<AffineTerm> row = {BlockX(kBlock * side), ThreadX(side), Loop(1, n)};
  const std::vector<AffineTerm> element = {BlockX(kBlock), ThreadX(1)};
  program.Launch("gesummv_kernel", 1, grid::Blocks(n / kBlock), Dim3{kBlock, 1, 1},
                 RooflineNanos(spec, 4.0 * n * n, 2.0 * n * n * 4),
                 {
                     Affine(a, AccessType::kRead, 4, 0, row),
                     Affine(x, AccessType::kRead, 4, 0, {Loop(1, n)}),
                     Affine(tmp, AccessType::kWrite, 4, 0, element),
                     Affine(b, AccessType::kRead, 4, 0, row),
                     Affine(y, AccessType::kRead, 4, 0, element),
                     Affine(y, AccessType::kWrite, 4, 0, element),
                 });
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(gesummv, {"gesummv",
                                       "PolyBench gesummv: two matrix-vector products, "
                                       "memory-bound and copy-dominated (8192 MB in the thesis)",
                                       {grid::ScaleParam()},
                                       MakeGesummv});

}  // namespace umlab
