// Rodinia's programs as HUM's evaluation ran them (the DeepUM thesis, §7.1;
// docs/hum.md): each one's copies, kernels and host code in the order its
// CUDA main() runs them, on the input the suite's run script gives it.
// Their kernels are bandwidth-bound stencils and sweeps, timed by the bytes
// they load and store (copy_program.h).
//
//   rodinia-cfd         euler3d.cu: the mesh's areas, neighbours and
//                       normals uploaded and their host arrays deleted
//                       right after; then per iteration a device-to-device
//                       copy, the step factors, and three Runge-Kutta
//                       stages of flux and time step; the variables out.
//   rodinia-srad        srad.cu (v2): per iteration the region of interest's
//                       statistics on the host, the image copied in, two
//                       kernels, the image copied back into the buffer it
//                       came from.
//   rodinia-pathfinder  pathfinder.cu: the grid's rows and its first row
//                       copied in, a kernel per pyramid of rows, the last
//                       row out.
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "workloads/hum/copy_program.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

absl::StatusOr<std::unique_ptr<Workload>> MakeCfd(const ParamMap& params,
                                                  const ComputeSpec& spec) {
  const uint64_t elements = CountParam(params, "elements");
  const uint64_t iterations = CountParam(params, "iterations");
  // euler3d.cu: NDIM 3, NNB 4 neighbours, NVAR = NDIM + 2, RK 3 stages.
  constexpr uint64_t kDims = 3, kNeighbours = 4, kVariables = kDims + 2, kStages = 3;
  const uint64_t variables_bytes = elements * kVariables * 4;
  CopyProgramBuilder p("rodinia-cfd", spec);
  const int areas = p.HostBuffer("areas", elements * 4);
  const int neighbours = p.HostBuffer("elements_surrounding", elements * kNeighbours * 4);
  const int normals = p.HostBuffer("normals", elements * kDims * kNeighbours * 4);
  const int result = p.HostBuffer("variables_out", variables_bytes, /*filled=*/false);
  const int d_areas = p.DeviceBuffer("d_areas", elements * 4);
  const int d_neighbours = p.DeviceBuffer("d_elements_surrounding", elements * kNeighbours * 4);
  const int d_normals = p.DeviceBuffer("d_normals", elements * kDims * kNeighbours * 4);
  const int variables = p.DeviceBuffer("d_variables", variables_bytes);
  const int old_variables = p.DeviceBuffer("d_old_variables", variables_bytes);
  const int fluxes = p.DeviceBuffer("d_fluxes", variables_bytes);
  const int step_factors = p.DeviceBuffer("d_step_factors", elements * 4);
  p.CopyIn(d_areas, areas);
  p.CopyIn(d_neighbours, neighbours);
  p.CopyIn(d_normals, normals);
  p.FreeHost(areas);
  p.FreeHost(neighbours);
  p.FreeHost(normals);
  p.Sweep("initialize_variables", 0, {{variables, kWrite}});
  p.Sweep("initialize_old_variables", 0, {{old_variables, kWrite}});
  p.Sweep("initialize_fluxes", 0, {{fluxes, kWrite}});
  p.Sweep("memset_step_factors", 0, {{step_factors, kWrite}});
  // compute_flux reads its element's and its four neighbours' variables,
  // its normals and neighbour indices, and writes its fluxes.
  const double flux_bytes = static_cast<double>(elements) *
                            ((1 + kNeighbours) * kVariables + kDims * kNeighbours +
                             kNeighbours + kVariables) *
                            4;
  for (uint64_t i = 0; i < iterations; ++i) {
    p.Sweep("copy_old_variables", 0, {{variables, kRead}, {old_variables, kWrite}});
    p.Sweep("compute_step_factor", 0,
            {{variables, kRead}, {d_areas, kRead}, {step_factors, kWrite}});
    for (uint64_t stage = 0; stage < kStages; ++stage) {
      p.Sweep("compute_flux", 0,
              {{d_neighbours, kRead}, {d_normals, kRead}, {variables, kRead}, {fluxes, kWrite}},
              flux_bytes);
      p.Sweep("time_step", 0,
              {{step_factors, kRead}, {old_variables, kRead}, {fluxes, kRead},
               {variables, kWrite}});
    }
  }
  p.CopyOut(result, variables);
  return MakeCopyWorkload(
      absl::StrFormat("Rodinia cfd (euler3d), %d elements (fvcorr.domn.193K) for %d iterations: "
                      "three uploads whose host arrays are deleted right after, 8 kernels per "
                      "iteration, the variables out",
                      elements, iterations),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeSrad(const ParamMap& params,
                                                   const ComputeSpec& spec) {
  const uint64_t rows = CountParam(params, "rows"), cols = CountParam(params, "cols");
  const uint64_t iterations = CountParam(params, "iterations");
  const uint64_t roi = std::min<uint64_t>(128, rows) * std::min<uint64_t>(128, cols);
  const uint64_t image = rows * cols * 4;
  CopyProgramBuilder p("rodinia-srad", spec);
  const int j = p.HostBuffer("J", image);
  const int d_j = p.DeviceBuffer("J_cuda", image), d_c = p.DeviceBuffer("C_cuda", image);
  const int d_e = p.DeviceBuffer("E_C", image), d_w = p.DeviceBuffer("W_C", image);
  const int d_n = p.DeviceBuffer("N_C", image), d_s = p.DeviceBuffer("S_C", image);
  for (uint64_t i = 0; i < iterations; ++i) {
    // The region of interest (rows and columns 0 to 127 in the run script)
    // summed on the host.
    p.HostCode("roi_statistics", static_cast<double>(roi * 4), {{j, kRead}});
    p.CopyIn(d_j, j);
    p.Sweep("srad_cuda_1", 0,
            {{d_j, kRead}, {d_n, kWrite}, {d_s, kWrite}, {d_w, kWrite}, {d_e, kWrite},
             {d_c, kWrite}});
    p.Sweep("srad_cuda_2", 0,
            {{d_c, kRead}, {d_n, kRead}, {d_s, kRead}, {d_w, kRead}, {d_e, kRead},
             {d_j, kRead}, {d_j, kWrite}});
    p.CopyOut(j, d_j);
  }
  return MakeCopyWorkload(
      absl::StrFormat("Rodinia srad (v2), a %dx%d image for %d iterations (the run script's): "
                      "per iteration host statistics, the image in, two kernels, the image "
                      "back into its source",
                      rows, cols, iterations),
      p);
}

absl::StatusOr<std::unique_ptr<Workload>> MakePathfinder(const ParamMap& params,
                                                         const ComputeSpec& spec) {
  const uint64_t cols = CountParam(params, "cols"), rows = CountParam(params, "rows");
  const uint64_t pyramid = CountParam(params, "pyramid");
  if (rows < 2) return absl::InvalidArgumentError("rodinia-pathfinder: rows must be at least 2");
  const uint64_t row_bytes = cols * 4;
  CopyProgramBuilder p("rodinia-pathfinder", spec);
  // One malloc'd grid in the program: its first row and the rest, copied
  // apart.
  const int first_row = p.HostBuffer("data_first_row", row_bytes);
  const int wall = p.HostBuffer("data_wall", (rows - 1) * row_bytes);
  const int result = p.HostBuffer("result", row_bytes, /*filled=*/false);
  const int d_wall = p.DeviceBuffer("gpuWall", (rows - 1) * row_bytes);
  const int d_result[2] = {p.DeviceBuffer("gpuResult0", row_bytes),
                           p.DeviceBuffer("gpuResult1", row_bytes)};
  p.CopyIn(d_wall, wall);
  p.CopyIn(d_result[0], first_row);
  int src = 0;
  for (uint64_t t = 0; t < rows - 1; t += pyramid) {
    const uint64_t band = std::min(pyramid, rows - 1 - t);
    p.Kernel(absl::StrFormat("dynproc_rows_%d", t), 0,
             {{d_wall, kRead, t * row_bytes, band * row_bytes},
              {d_result[src], kRead},
              {d_result[1 - src], kWrite}});
    src = 1 - src;
  }
  p.CopyOut(result, d_result[src]);
  return MakeCopyWorkload(
      absl::StrFormat("Rodinia pathfinder, %d columns and %d rows in pyramids of %d (the run "
                      "script's): the grid in, a kernel per pyramid, the last row out",
                      cols, rows, pyramid),
      p);
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(
    rodinia_cfd,
    {"rodinia-cfd", "Rodinia cfd as HUM ran it: uploads whose sources are deleted at once",
     {{"elements", ParamType::kInt, "193474",
       "mesh elements (fvcorr.domn.193K, the largest of the run script's meshes)",
       ParamRange::Closed(1, 1ll << 30)},
      {"iterations", ParamType::kInt, "2000", "solver iterations (euler3d.cu's)",
       ParamRange::Closed(1, 1000000)}},
     MakeCfd});
UMLAB_REGISTER_WORKLOAD(
    rodinia_srad,
    {"rodinia-srad", "Rodinia srad v2 as HUM ran it: the image in and back every iteration",
     {{"rows", ParamType::kInt, "2048", "image rows (the run script's)",
       ParamRange::Closed(1, 1 << 20)},
      {"cols", ParamType::kInt, "2048", "image columns", ParamRange::Closed(1, 1 << 20)},
      {"iterations", ParamType::kInt, "2", "iterations (the run script's)",
       ParamRange::Closed(1, 100000)}},
     MakeSrad});
UMLAB_REGISTER_WORKLOAD(
    rodinia_pathfinder,
    {"rodinia-pathfinder", "Rodinia pathfinder as HUM ran it: the grid in, a few kernels",
     {{"cols", ParamType::kInt, "100000", "columns (the run script's)",
       ParamRange::Closed(1, 1ll << 32)},
      {"rows", ParamType::kInt, "100", "rows", ParamRange::Closed(2, 1 << 20)},
      {"pyramid", ParamType::kInt, "20", "rows per kernel", ParamRange::Closed(1, 1 << 20)}},
     MakePathfinder});

}  // namespace umlab
