// Parboil's programs as HUM's evaluation ran them (the DeepUM thesis, §7.1;
// docs/hum.md): each one's copies, kernels and host code in the order its
// CUDA main() runs them, on the suite's largest dataset. Kernels are timed
// by their roofline (copy_program.h), from the FLOPs and bytes given next
// to each.
//
//   parboil-sgemm  main.cc: cudaMemcpy A and B^T in, regtileSgemm, C out.
//   parboil-spmv   main.cu: four cudaMemcpy in (the JDS matrix, its
//                  permutation, x), spmv_jds 50 times, y out.
//   parboil-lbm    main.cu: both grids copied in, statistics of the source
//                  grid on the host, then both host grids freed right after
//                  their copies; a stream-collide kernel per time step on
//                  swapped grids; the source grid out, statistics again.
//   parboil-tpacf  main.cu: the points split into x, y, z arrays on the host
//                  (their struct array freed), one copy in, one kernel
//                  building every histogram, the histograms out and summed,
//                  and the source freed.
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "workloads/hum/copy_program.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

absl::StatusOr<std::unique_ptr<Workload>> MakeSgemm(const ParamMap& params,
                                                    const ComputeSpec& spec) {
  const uint64_t m = CountParam(params, "m"), n = CountParam(params, "n");
  const uint64_t k = CountParam(params, "k");
  CopyProgramBuilder p("parboil-sgemm", spec);
  const int a = p.HostBuffer("A", m * k * 4), bt = p.HostBuffer("BT", n * k * 4);
  const int c = p.HostBuffer("C", m * n * 4, /*filled=*/false);
  const int da = p.DeviceBuffer("dA", m * k * 4), db = p.DeviceBuffer("dB", n * k * 4);
  const int dc = p.DeviceBuffer("dC", m * n * 4);
  p.CopyIn(da, a);
  p.CopyIn(db, bt);
  // 2 m n k FLOPs; each matrix moved once at least.
  p.Kernel("regtile_sgemm", 2.0 * m * n * k, {{da, kRead}, {db, kRead}, {dc, kWrite}});
  p.CopyOut(c, dc);
  return MakeCopyWorkload(
      absl::StrFormat("Parboil sgemm, C = A B^T with A %dx%d and B^T %dx%d in fp32 (the "
                      "medium dataset's matrices): A and B^T copied in, one kernel, C out",
                      m, k, n, k),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeSpmv(const ParamMap& params,
                                                   const ComputeSpec& spec) {
  const uint64_t rows = CountParam(params, "rows"), nonzeros = CountParam(params, "nonzeros");
  const uint64_t launches = CountParam(params, "launches");
  CopyProgramBuilder p("parboil-spmv", spec);
  const int data = p.HostBuffer("jds_data", nonzeros * 4);
  const int indices = p.HostBuffer("jds_indices", nonzeros * 4);
  const int perm = p.HostBuffer("perm", rows * 4), x = p.HostBuffer("x", rows * 4);
  const int y = p.HostBuffer("y", rows * 4, /*filled=*/false);
  const int d_data = p.DeviceBuffer("d_data", nonzeros * 4);
  const int d_indices = p.DeviceBuffer("d_indices", nonzeros * 4);
  const int d_perm = p.DeviceBuffer("d_perm", rows * 4);
  const int d_x = p.DeviceBuffer("d_x", rows * 4), d_y = p.DeviceBuffer("d_y", rows * 4);
  p.CopyIn(d_data, data);
  p.CopyIn(d_indices, indices);
  p.CopyIn(d_perm, perm);
  p.CopyIn(d_x, x);
  // A multiply-add per nonzero; its value and column index, and the x
  // element it gathers, per nonzero; the permutation and y per row.
  for (uint64_t launch = 0; launch < launches; ++launch) {
    p.Kernel("spmv_jds", 2.0 * nonzeros,
             {{d_data, kRead}, {d_indices, kRead}, {d_perm, kRead}, {d_x, kRead}, {d_y, kWrite}},
             12.0 * nonzeros + 8.0 * rows);
  }
  p.CopyOut(y, d_y);
  return MakeCopyWorkload(
      absl::StrFormat("Parboil spmv (JDS), %d rows and %d nonzeros (the large dataset, "
                      "Dubcova3): four copies in, %d launches, y out",
                      rows, nonzeros, launches),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeLbm(const ParamMap& params,
                                                  const ComputeSpec& spec) {
  const uint64_t steps = CountParam(params, "steps");
  // lbm's CUDA layout (layout_config.h): 120 x 120 x 150 cells padded to
  // 128 x 120 x 154, 20 floats per cell (19 distributions and a flag word).
  constexpr uint64_t kGridBytes = 128ull * 120 * 154 * 20 * 4;
  CopyProgramBuilder p("parboil-lbm", spec);
  const int src = p.HostBuffer("src_grid", kGridBytes);
  const int dst = p.HostBuffer("dst_grid", kGridBytes);
  const int result = p.HostBuffer("result_grid", kGridBytes, /*filled=*/false);
  const int grids[2] = {p.DeviceBuffer("d_src_grid", kGridBytes),
                        p.DeviceBuffer("d_dst_grid", kGridBytes)};
  p.CopyIn(grids[0], src);
  p.CopyIn(grids[1], dst);
  p.HostCode("show_grid_statistics", kGridBytes, {{src, kRead}});
  p.FreeHost(src);
  p.FreeHost(dst);
  // Each step reads every cell of one grid and writes the other: memory
  // bound, so its time is the two grids' bytes.
  for (uint64_t step = 0; step < steps; ++step) {
    const int from = grids[step % 2], to = grids[(step + 1) % 2];
    p.Sweep(step % 2 == 0 ? "stream_collide_even" : "stream_collide_odd", 0,
            {{from, kRead}, {to, kWrite}});
  }
  p.CopyOut(result, grids[steps % 2]);
  p.HostCode("show_result_statistics", kGridBytes, {{result, kRead}});
  return MakeCopyWorkload(
      absl::StrFormat("Parboil lbm, 120x120x150 cells (the long dataset's grid) for %d steps: "
                      "both grids copied in, the host's freed right after, a kernel per step, "
                      "the grid out",
                      steps),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeTpacf(const ParamMap& params,
                                                    const ComputeSpec& spec) {
  const uint64_t sets = CountParam(params, "sets"), points = CountParam(params, "points");
  // NUM_BINS: 20 bins of 8-byte counts per histogram, one for the data
  // and two per random set.
  constexpr uint64_t kBins = 20;
  const uint64_t hist_bytes = kBins * (2 * sets + 1) * 8;
  const uint64_t all_points = (sets + 1) * points;
  CopyProgramBuilder p("parboil-tpacf", spec);
  const int cartesian = p.HostBuffer("all_data", all_points * 12);
  const int xyz = p.HostBuffer("xyz_data", all_points * 12, /*filled=*/false);
  const int hists = p.HostBuffer("hists", hist_bytes, /*filled=*/false);
  const int d_xyz = p.DeviceBuffer("d_xyz_data", all_points * 12);
  const int d_hists = p.DeviceBuffer("d_hists", hist_bytes);
  p.HostCode("split_xyz", 2.0 * all_points * 12, {{cartesian, kRead}, {xyz, kWrite}});
  p.FreeHost(cartesian);
  p.CopyIn(d_xyz, xyz);
  // Every pair of the data set with itself, each random set with itself,
  // and the data with each random set; per pair a dot product (5 FLOPs)
  // and a binary search over the bins (5 steps).
  const double n = static_cast<double>(points);
  const double pairs = n * (n - 1) / 2 * static_cast<double>(sets + 1) +
                       n * n * static_cast<double>(sets);
  p.Kernel("gen_hists", 10.0 * pairs, {{d_xyz, kRead}, {d_hists, kWrite}});
  p.CopyOut(hists, d_hists);
  p.HostCode("sum_histograms", static_cast<double>(hist_bytes), {{hists, kRead}});
  p.FreeHost(xyz);
  return MakeCopyWorkload(
      absl::StrFormat("Parboil tpacf, %d points and %d random sets (the large dataset): the "
                      "points split on the host, one copy in, one kernel, the histograms "
                      "out, the source freed",
                      points, sets),
      p);
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(
    parboil_sgemm,
    {"parboil-sgemm", "Parboil sgemm as HUM ran it: two copies in, a GEMM, one out",
     {{"m", ParamType::kInt, "1024", "rows of A and C (the medium dataset's matrix1)",
       ParamRange::Closed(1, 1 << 17)},
      {"n", ParamType::kInt, "1056", "columns of C, rows of B^T (matrix2t)",
       ParamRange::Closed(1, 1 << 17)},
      {"k", ParamType::kInt, "992", "columns of A and B^T", ParamRange::Closed(1, 1 << 17)}},
     MakeSgemm});
UMLAB_REGISTER_WORKLOAD(
    parboil_spmv,
    {"parboil-spmv", "Parboil spmv (JDS) as HUM ran it: four copies in, 50 launches, one out",
     {{"rows", ParamType::kInt, "146689", "matrix rows (Dubcova3, the large dataset)",
       ParamRange::Closed(1, 1ll << 32)},
      {"nonzeros", ParamType::kInt, "3636643", "nonzeros (Dubcova3)",
       ParamRange::Closed(1, 1ll << 34)},
      {"launches", ParamType::kInt, "50", "spmv_jds launches (main.cu's loop)",
       ParamRange::Closed(1, 100000)}},
     MakeSpmv});
UMLAB_REGISTER_WORKLOAD(
    parboil_lbm,
    {"parboil-lbm",
     "Parboil lbm as HUM ran it: both grids copied in and their host copies freed at once",
     {{"steps", ParamType::kInt, "3000", "time steps (the long dataset's 3000; short: 100)",
       ParamRange::Closed(1, 1000000)}},
     MakeLbm});
UMLAB_REGISTER_WORKLOAD(
    parboil_tpacf,
    {"parboil-tpacf", "Parboil tpacf as HUM ran it: one copy in, one heavy kernel, the source freed",
     {{"sets", ParamType::kInt, "100", "random point sets (the large dataset's -n)",
       ParamRange::Closed(1, 100000)},
      {"points", ParamType::kInt, "10391", "points per set (the large dataset's -p)",
       ParamRange::Closed(2, 1 << 26)}},
     MakeTpacf});

}  // namespace umlab
