// Rodinia's hotspot (hotspot.cu): a thermal simulation over an N x N grid
// of fp32 temperatures and power densities. Each kernel advances
// `pyramid` time steps: a 16 x 16 thread block loads the tile of
// temperatures and powers it covers, halo included (rows and columns
// 16 - 2 pyramid apart), and writes the inner (16 - 2 pyramid)^2 cells to
// the other temperature array; the two swap roles between kernels. Every
// index is affine (blkY = small_block_rows by - border_rows, loadYidx =
// blkY + ty, index = grid_cols loadYidx + loadXidx). Neighbouring devices
// share the halo rows, so after the first kernel those move between them.
//
// Size: 12288 MB in the thesis (Table 7.10): three 32768 x 32768 fp32
// arrays (temperature in and out, power). Rodinia's own run script runs
// `hotspot 512 2 2`: pyramid height 2 and 2 time steps, one kernel; the
// thesis gives neither, so those are the defaults. Compute: the roofline
// over the three arrays' bytes (a handful of FLOPs per cell).
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

constexpr uint32_t kBlock = 16;  // hotspot.cu's BLOCK_SIZE
constexpr double kThesisBytes = 12288 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeHotspot(const ParamMap& params,
                                                         const ComputeSpec& spec) {
  const int64_t pyramid = params.Int("pyramid");
  const int64_t steps = params.Int("steps");
  if (2 * pyramid >= kBlock) {
    return absl::InvalidArgumentError(
        absl::StrFormat("hotspot: pyramid %d leaves no inner cells in a 16 x 16 block", pyramid));
  }
  const uint64_t n = grid::SquareSide(kThesisBytes * params.Double("scale"), 3, 4, kBlock);
  const int64_t side = static_cast<int64_t>(n);
  const int64_t inner = kBlock - 2 * pyramid;  // small_block_rows
  const uint32_t blocks = static_cast<uint32_t>((n + inner - 1) / inner);
  grid::GridProgramBuilder program(
      absl::StrFormat("hotspot (%d x %d, pyramid %d, %d steps)", n, n, pyramid, steps));
  const int temp[2] = {program.Array("temp0", n * n * 4, true, false),
                       program.Array("temp1", n * n * 4, false, false)};
  const int power = program.Array("power", n * n * 4, true, false);
  // A tile with its halo: rows inner by - pyramid + ty, columns likewise.
  const std::vector<AffineTerm> tile = {BlockY(inner * side), ThreadY(side), BlockX(inner),
                                        ThreadX(1)};
  const int64_t tile_origin = -pyramid * side - pyramid;
  // The cells a block computes, ty and tx from pyramid to 15 - pyramid: a
  // square of `inner` threads a side inside the tile.
  const AffineIndex cells{0,
                          {BlockY(inner * side), Loop(side, inner), BlockX(inner), Loop(1, inner)}};
  const int kernels = static_cast<int>((steps + pyramid - 1) / pyramid);
  int source = 0;
  const Dim3 threads{kBlock, kBlock, 1};
  for (int k = 0; k < kernels; ++k) {
    // The arguments differ by which array is the source: two execution ids.
    program.Launch(
        absl::StrFormat("calculate_temp(temp%d -> temp%d)", source, 1 - source),
        static_cast<uint32_t>(1 + source), Dim3{blocks, blocks, 1}, threads,
        RooflineNanos(spec, 15.0 * static_cast<double>(pyramid) * n * n, 3.0 * n * n * 4),
        {
            Affine(power, AccessType::kRead, 4, tile_origin, tile),
            Affine(temp[source], AccessType::kRead, 4, tile_origin, tile),
            // dst[index] = ..., made only where `computed`: MAPA sees the
            // tile's index, the inner threads store.
            grid::GuardedAffine(program.program(), temp[1 - source], AccessType::kWrite, 4,
                                AffineIndex{tile_origin, tile}, cells, threads),
        });
    source = 1 - source;
  }
  program.mutable_array(temp[source]).copied_out = true;
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    hotspot,
    {"hotspot",
     "Rodinia hotspot: a stencil over 2D tiles with halos, temperatures ping-ponging "
     "between two arrays (12288 MB in the thesis)",
     {grid::ScaleParam(),
      {"pyramid", ParamType::kInt, "2",
       "time steps per kernel (pyramid_height; Rodinia's run script: 2)", ParamRange::Closed(1, 7)},
      {"steps", ParamType::kInt, "2", "time steps in all (sim_time; Rodinia's run script: 2)",
       ParamRange::Closed(1, 1000)}},
     MakeHotspot});

}  // namespace umlab
