// The kernel shapes several PolyBench/GPU programs share, as their CUDA
// sources index their n x n fp32 matrices (row-major, element i n + j):
//  - the matrix product of gemm.cu, 2mm.cu and 3mm.cu: blocks of 32 x 8
//    threads, thread (tx, ty) of block (bx, by) computes out[i][j] with
//    i = 8 by + ty and j = 32 bx + tx, looping k over row i of the left
//    matrix and column j of the right one (out[i][j] += ... reads it too);
//  - the column statistics of correlation.cu and covariance.cu: one thread
//    per column j = 256 bx + tx walking it, a 2D pass over every element,
//    and the symmetric product whose thread j1 fills row j1 and mirrors it
//    into column j1 (the loop of j2 from j1 taken over the whole row, as
//    MAPA's bounds see it).
// Every index here is affine.
#ifndef UMLAB_WORKLOADS_SNURHAC_POLYBENCH_KERNELS_H_
#define UMLAB_WORKLOADS_SNURHAC_POLYBENCH_KERNELS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/compute_spec.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab::grid {

inline constexpr uint32_t kPolybench2DX = 32, kPolybench2DY = 8;  // DIM_THREAD_BLOCK_X/Y
inline constexpr uint32_t kPolybench1D = 256;                     // 1D kernels' DIM_THREAD_BLOCK_X

// The grid and block of a 2D PolyBench kernel over n x n outputs.
inline Dim3 Polybench2DGrid(uint64_t n) { return Blocks(n / kPolybench2DX, n / kPolybench2DY); }
inline Dim3 Polybench2DThreads() { return Dim3{kPolybench2DX, kPolybench2DY, 1}; }
inline Dim3 Polybench1DGrid(uint64_t n) { return Blocks(n / kPolybench1D); }
inline Dim3 Polybench1DThreads() { return Dim3{kPolybench1D, 1, 1}; }

// Element [i][j] of a 2D kernel's thread: i = 8 by + ty, j = 32 bx + tx.
inline std::vector<AffineTerm> Polybench2DElement(int64_t n) {
  return {BlockY(kPolybench2DY * n), ThreadY(n), BlockX(kPolybench2DX), ThreadX(1)};
}
// Row i of a 2D kernel's thread, over k.
inline std::vector<AffineTerm> Polybench2DRow(int64_t n) {
  return {BlockY(kPolybench2DY * n), ThreadY(n), Loop(1, static_cast<uint64_t>(n))};
}
// Column j of a 2D kernel's thread, over k.
inline std::vector<AffineTerm> Polybench2DColumn(int64_t n) {
  return {Loop(n, static_cast<uint64_t>(n)), BlockX(kPolybench2DX), ThreadX(1)};
}

// out += left x right, n x n: out read, left's row, right's column, out
// written (gemm.cu's order).
inline void MatrixProduct(GridProgramBuilder& program, std::string name, uint32_t exec_id,
                          uint64_t n, int left, int right, int out, const ComputeSpec& spec) {
  const int64_t side = static_cast<int64_t>(n);
  const double matrix_bytes = static_cast<double>(n * n * 4);
  program.Launch(std::move(name), exec_id, Polybench2DGrid(n), Polybench2DThreads(),
                 RooflineNanos(spec, 2.0 * n * n * n, 3 * matrix_bytes),
                 {Affine(out, AccessType::kRead, 4, 0, Polybench2DElement(side)),
                  Affine(left, AccessType::kRead, 4, 0, Polybench2DRow(side)),
                  Affine(right, AccessType::kRead, 4, 0, Polybench2DColumn(side)),
                  Affine(out, AccessType::kWrite, 4, 0, Polybench2DElement(side))});
}

// Column j = 256 bx + tx of an n x n matrix, over i.
inline std::vector<AffineTerm> Polybench1DColumn(int64_t n) {
  return {Loop(n, static_cast<uint64_t>(n)), BlockX(kPolybench1D), ThreadX(1)};
}
// Variable j = 256 bx + tx of a vector.
inline std::vector<AffineTerm> Polybench1DElement() { return {BlockX(kPolybench1D), ThreadX(1)}; }

// The symmetric product's accesses (corr_kernel, covar_kernel): thread j1
// reads columns j1 and j2 for every i and j2, stores row j1 and column j1.
inline std::vector<GridAccess> SymmetricProductAccesses(int data, int symmat, int64_t n) {
  const uint64_t trips = static_cast<uint64_t>(n);
  return {Affine(data, AccessType::kRead, 4, 0, {Loop(n, trips), Loop(1, trips)}),
          Affine(symmat, AccessType::kWrite, 4, 0,
                 {BlockX(kPolybench1D * n), ThreadX(n), Loop(1, trips)}),
          Affine(symmat, AccessType::kWrite, 4, 0, Polybench1DColumn(n))};
}

}  // namespace umlab::grid

#endif  // UMLAB_WORKLOADS_SNURHAC_POLYBENCH_KERNELS_H_
