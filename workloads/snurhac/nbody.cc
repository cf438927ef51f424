// The CUDA Samples' nbody (bodysystemcuda.cu, integrateBodies): every body
// feels every other. Thread 256 bx + tx integrates one body: it walks all
// positions of the previous step a tile of 256 at a time
// (oldPos[256 tile + tx], staged in shared memory), then reads and writes
// its velocity and writes its new position. Positions ping-pong between
// two buffers from step to step. Every index is affine. Every device reads
// every position each step, and the positions each device wrote in the
// step before, so pages move between the GPUs at every launch.
//
// Size: 576 MB in the thesis (Table 7.10): two position buffers and the
// velocities, float4 each, 48 bytes a body: 12.6 million bodies. Steps:
// the sample's benchmark mode runs 10 (`iterations`); the thesis does not
// say. Compute: 20 FLOPs an interaction (the sample's own count,
// flopsPerInteraction) at the fp32 peak.
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

constexpr uint32_t kThreads = 256;   // the sample's default block size
constexpr uint32_t kBodyBytes = 16;  // float4
constexpr double kFlopsPerInteraction = 20;
constexpr double kThesisBytes = 576 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeNbody(const ParamMap& params,
                                                       const ComputeSpec& spec) {
  const uint64_t bodies = std::max<uint64_t>(
      kThreads, static_cast<uint64_t>(kThesisBytes * params.Double("scale") / (3 * kBodyBytes)) /
                    kThreads * kThreads);
  const int64_t steps = params.Int("iterations");
  grid::GridProgramBuilder program(absl::StrFormat("nbody (%d bodies, %d steps)", bodies, steps));
  const int pos[2] = {program.Array("pos0", bodies * kBodyBytes, true, false),
                      program.Array("pos1", bodies * kBodyBytes, false, false)};
  const int vel = program.Array("vel", bodies * kBodyBytes, true, false);
  const uint64_t tiles = bodies / kThreads;
  const std::vector<AffineTerm> body = {BlockX(kThreads), ThreadX(1)};
  const double n = static_cast<double>(bodies);
  int current = 0;
  for (int64_t step = 0; step < steps; ++step) {
    program.Launch(absl::StrFormat("integrateBodies(pos%d -> pos%d)", current, 1 - current),
                   static_cast<uint32_t>(1 + current), grid::Blocks(tiles), Dim3{kThreads, 1, 1},
                   RooflineNanos(spec, kFlopsPerInteraction * n * n, 4.0 * n * kBodyBytes),
                   {Affine(pos[current], AccessType::kRead, kBodyBytes, 0,
                           {Loop(kThreads, tiles), ThreadX(1)}),
                    Affine(vel, AccessType::kRead, kBodyBytes, 0, body),
                    Affine(vel, AccessType::kWrite, kBodyBytes, 0, body),
                    Affine(pos[1 - current], AccessType::kWrite, kBodyBytes, 0, body)});
    current = 1 - current;
  }
  program.mutable_array(pos[current]).copied_out = true;
  program.mutable_array(vel).copied_out = true;
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    nbody, {"nbody",
            "CUDA Samples nbody: all-pairs forces, every device reading every position each "
            "step (576 MB in the thesis)",
            {grid::ScaleParam(),
             {"iterations", ParamType::kInt, "10", "time steps (the sample's benchmark mode: 10)",
              ParamRange::Closed(1, 1000)}},
            MakeNbody});

}  // namespace umlab
