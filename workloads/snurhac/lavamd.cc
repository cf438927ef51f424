// Rodinia's lavaMD: particle interactions in a 3D grid of B^3 boxes of 100
// particles each. Thread block b (one per box, 128 threads) reads its box's
// record, then the positions and charges of the particles of its box and
// of each of up to 26 neighbour boxes, and adds to its own particles'
// forces. The particles' offsets come from the box records
// (first_i = box[bx].offset, first_j = box[nei.number].offset): indirect
// indices MAPA cannot analyse, so only the box records are affine; the
// thesis names lavaMD with tpacf as where dynamic prefetching matters
// (§7.3.2). Positions and charges are only read (the read-only flag);
// forces are read and written.
//
// Boxes are numbered i B^2 + j B + k by position (lavaMD's main.c), so the
// boxes a run of blocks reads are its own widened by B^2 + B + 1 on each
// side; that window is what a share touches (it over-counts a few boxes at
// the grid's faces).
//
// Size: 7492 MB in the thesis (Table 7.10): B = 100 gives 10^6 boxes of a
// 656-byte record (box_str) and 100 particles of 72 bytes (position and
// force, four fp64 each; charge, one fp64), 7492 MiB. Compute: an
// assumption of 40 double-precision operations per particle pair (the
// distance, an exponential, the force's four components), each counted
// twice against the fp32 peak (a V100's fp64 rate is half its fp32 rate).
#include <algorithm>
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
using grid::Indirect;

constexpr uint32_t kThreads = 128;          // lavaMD's NUMBER_THREADS
constexpr uint64_t kParticlesPerBox = 100;  // lavaMD's NUMBER_PAR_PER_BOX
constexpr uint32_t kBoxRecordBytes =
    656;  // sizeof(box_str): 26 nei_str of 24 bytes and the box's own fields
constexpr uint32_t kVectorBytes = 32;  // FOUR_VECTOR of fp64
constexpr uint32_t kChargeBytes = 8;   // fp64
constexpr double kThesisBytes = 7492 * grid::kMiB;
constexpr double kOpsPerPair = 40;  // an assumption (see above)

absl::StatusOr<std::unique_ptr<GridProgram>> MakeLavaMd(const ParamMap& params,
                                                        const ComputeSpec& spec) {
  const double per_box = kBoxRecordBytes + kParticlesPerBox * (2.0 * kVectorBytes + kChargeBytes);
  const uint64_t side = std::max<uint64_t>(
      2, static_cast<uint64_t>(
             std::llround(std::cbrt(kThesisBytes * params.Double("scale") / per_box))));
  const uint64_t boxes = side * side * side;
  grid::GridProgramBuilder program(absl::StrFormat("lavaMD (%d^3 boxes)", side));
  const uint64_t particles = boxes * kParticlesPerBox;
  const int box = program.Array("box", boxes * kBoxRecordBytes, true, false);
  const int rv = program.Array("rv", particles * kVectorBytes, true, false);
  const int qv = program.Array("qv", particles * kChargeBytes, true, false);
  const int fv = program.Array("fv", particles * kVectorBytes, true, true);

  const double pairs = static_cast<double>(boxes) * 27 * kParticlesPerBox * kParticlesPerBox;
  const Nanos compute_ns = RooflineNanos(spec, 2 * kOpsPerPair * pairs,
                                         static_cast<double>(program.program().footprint_bytes()));
  const uint64_t reach = side * side + side + 1;  // the farthest neighbour's number
  // The particles of boxes [first - widen, last + widen) of one array.
  auto particles_of = [boxes](const GridArray& array, uint32_t bytes, uint64_t widen) {
    return [boxes, bytes, widen, base = array.address](const GridShare& share) {
      const uint64_t first = share.first.x, last = share.first.x + share.extent.x;
      const uint64_t from = first > widen ? first - widen : 0;
      const uint64_t to = std::min(boxes, last + widen);
      const uint64_t box_bytes = kParticlesPerBox * bytes;
      return std::vector<ByteRange>{{base + from * box_bytes, base + to * box_bytes}};
    };
  };
  program.Launch("kernel_gpu_cuda", 1, grid::Blocks(boxes), Dim3{kThreads, 1, 1}, compute_ns,
                 {
                     // box[bx]: every thread reads the record's fields.
                     Affine(box, AccessType::kRead, kBoxRecordBytes, 0, {BlockX(1)}),
                     Indirect(rv, AccessType::kRead, kVectorBytes,
                              particles_of(program.array(rv), kVectorBytes, reach)),
                     Indirect(qv, AccessType::kRead, kChargeBytes,
                              particles_of(program.array(qv), kChargeBytes, reach)),
                     Indirect(fv, AccessType::kRead, kVectorBytes,
                              particles_of(program.array(fv), kVectorBytes, 0)),
                     Indirect(fv, AccessType::kWrite, kVectorBytes,
                              particles_of(program.array(fv), kVectorBytes, 0)),
                 });
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    lavamd, {"lavamd",
             "Rodinia lavaMD: boxes read their neighbours' particles through offsets in box "
             "records, which MAPA cannot analyse (7492 MB in the thesis)",
             {grid::ScaleParam()},
             MakeLavaMd});

}  // namespace umlab
