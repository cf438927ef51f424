// Rodinia's particlefilter, its GPU-resident version (particlefilter_float,
// ex_particle_CUDA_float_seq.cu, fp64 throughout): tracking an object
// through Nfr frames of a video with Nparticles particles. Per frame k = 1
// .. Nfr - 1 it launches four kernels, blocks of 512 threads, one thread
// per particle i = 512 bx + tx:
//  - likelihood_kernel: arrayX[i], arrayY[i] from xj[i], yj[i] plus noise
//    (seed[i]), weights[i] reset; the 69 pixel indices of a disk around the
//    particle into ind[69 i + y], then reads I at those indices (data
//    dependent: MAPA cannot analyse them), likelihood[i], weights[i] *=
//    exp(likelihood), and each block's partial sum into partial_sums[bx];
//  - sum_kernel: thread 0 alone sums partial_sums into partial_sums[0];
//  - normalize_weights_kernel: weights[i] /= partial_sums[0]; thread 0
//    alone builds the whole CDF from the weights and stores u[0]; every
//    thread stores u[i] = u[0] + i / N;
//  - find_index_kernel: thread i scans CDF from 0 until CDF[x] >= u[i]
//    (a data-dependent exit), then xj[i] = arrayX[x], yj[i] = arrayY[x]
//    (data-dependent indices MAPA cannot analyse).
// MAPA's representative threads ignore the `i == 0` conditions, so
// thread 0's stores seem to be made by every block: sum_kernel's one
// store (partial_sums[0]) trips the §6.4 overlap check and runs on one
// device; normalize_weights_kernel's CDF is a third of what it writes (the
// weights and u split), under the threshold, so it splits and the device
// holding block 0 builds the CDF. So at every frame the weights move to
// that device for the CDF and back for the next likelihood, and the CDF it
// writes moves to every device that scans it: the "same memory object,
// different access patterns on every launch" of the thesis (§7.3.2).
//
// Truths, **assumptions**: the weights stay close to uniform, so the
// resampled index of particle i is near i: a share's scan of the CDF
// reaches its last particle, and its reads of arrayX and arrayY stay in
// its own range; the particles stay within 20 pixels of the object, which
// moves one pixel along x per frame from the image's centre (Rodinia's
// videoSequence), so a frame's reads of I are those 40 rows of frame k.
//
// Size: 3360 MB in the thesis (Table 7.10) with the run script's video
// (128 x 128, 10 frames): 352 bytes a particle (nine fp64 arrays, seed,
// and ind's 69 ints), 10 million particles. Compute, **assumptions**: 800
// fp64 operations a particle for likelihood (the disk and two Box-Muller
// draws), counted twice against the fp32 peak; the serial loops of thread
// 0 at 10 ns an element (a dependent fp64 add and a load); find_index's
// scans at 2 operations an element scanned, N^2 / 2 in all, at the peak,
// the caches serving the scans' rereads.
#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;
using grid::ElementWindow;
using grid::Indirect;
using grid::Loop;
using grid::ThreadX;

constexpr uint32_t kThreads = 512;                             // threads_per_block
constexpr uint64_t kDiskOnes = 69;                             // strelDisk(radius 5): countOnes
constexpr uint64_t kWidth = 128, kHeight = 128, kFrames = 10;  // the run script's video
// A row of I, all frames: I[x][y][k] = x IszY Nfr + y Nfr + k.
constexpr int64_t kRowBytes = kHeight * kFrames;
constexpr uint64_t kReach = 20;  // pixels around the object (an assumption)
constexpr double kParticleBytes = 9 * 8 + 4 + kDiskOnes * 4;
constexpr double kThesisBytes = 3360 * grid::kMiB;
constexpr double kLikelihoodOps = 800;         // an assumption
constexpr double kSerialNanosPerElement = 10;  // an assumption

absl::StatusOr<std::unique_ptr<GridProgram>> MakeParticleFilter(const ParamMap& params,
                                                                const ComputeSpec& spec) {
  const uint64_t n = std::max<uint64_t>(
      kThreads, static_cast<uint64_t>(kThesisBytes * params.Double("scale") / kParticleBytes));
  const uint64_t blocks = grid::BlocksFor(n, kThreads);
  grid::GridProgramBuilder program(absl::StrFormat("particlefilter (%d particles)", n));
  const int array_x = program.Array("arrayX", n * 8, false, true);
  const int array_y = program.Array("arrayY", n * 8, false, true);
  const int xj = program.Array("xj", n * 8, true, false);
  const int yj = program.Array("yj", n * 8, true, false);
  const int cdf = program.Array("CDF", n * 8, false, false);
  const int u = program.Array("u", n * 8, false, false);
  const int likelihood = program.Array("likelihood", n * 8, false, false);
  const int weights = program.Array("weights", n * 8, true, true);
  const int image = program.Array("I", kWidth * kHeight * kFrames, true, false);
  const int objxy = program.Array("objxy", 2 * kDiskOnes * 4, true, false);
  const int ind = program.Array("ind", n * kDiskOnes * 4, false, false);
  const int seed = program.Array("seed", n * 4, true, false);
  const int partial_sums = program.Array("partial_sums", n * 8, false, false);

  const std::vector<AffineTerm> particle = {BlockX(kThreads), ThreadX(1)};
  const Dim3 grid = grid::Blocks(blocks), threads{kThreads, 1, 1};
  const double particles = static_cast<double>(n);
  // What thread 0 alone touches: `elements` from 0 in the share holding
  // block 0, nothing elsewhere.
  auto thread_zero = [](int64_t elements) {
    return [elements](const GridShare& share) {
      return share.first.x == 0 ? ElementRange{0, elements} : ElementRange{0, 0};
    };
  };
  // MAPA's view of thread 0's loop over `elements`: no block term.
  auto whole = [](int array, AccessType type, uint64_t elements, grid::ElementWindowFunction truth,
                  const GridArray& target) {
    GridAccess access = Affine(array, type, 8, 0, {Loop(1, elements)});
    access.touched = ElementWindow(target, 8, std::move(truth));
    return access;
  };
  // A share's own particles: [512 first, 512 (first + extent)).
  auto own = [](const GridShare& share) {
    return ElementRange{static_cast<int64_t>(share.first.x) * kThreads,
                        static_cast<int64_t>(share.first.x + share.extent.x) * kThreads};
  };
  // CDF[0 .. the share's last particle]: the scans' reach.
  auto scanned = [](const GridShare& share) {
    return ElementRange{0, static_cast<int64_t>(share.first.x + share.extent.x) * kThreads};
  };
  const double serial_ns = kSerialNanosPerElement * particles;

  for (uint64_t frame = 1; frame < kFrames; ++frame) {
    const int64_t centre = static_cast<int64_t>(kWidth / 2 + frame);
    auto frame_rows = [centre](const GridShare&) {
      return ElementRange{(centre - static_cast<int64_t>(kReach)) * kRowBytes,
                          (centre + static_cast<int64_t>(kReach)) * kRowBytes};
    };
    program.Launch(
        "likelihood_kernel", 1, grid, threads,
        RooflineNanos(spec, 2 * kLikelihoodOps * particles, particles * kParticleBytes),
        {Affine(xj, AccessType::kRead, 8, 0, particle),
         Affine(yj, AccessType::kRead, 8, 0, particle),
         Affine(seed, AccessType::kRead, 4, 0, particle),
         Affine(seed, AccessType::kWrite, 4, 0, particle),
         Affine(array_x, AccessType::kWrite, 8, 0, particle),
         Affine(array_y, AccessType::kWrite, 8, 0, particle),
         Affine(objxy, AccessType::kRead, 4, 0, {Loop(1, 2 * kDiskOnes)}),
         Affine(ind, AccessType::kWrite, 4, 0,
                {BlockX(kThreads * kDiskOnes), ThreadX(kDiskOnes), Loop(1, kDiskOnes)}),
         Indirect(image, AccessType::kRead, 1, ElementWindow(program.array(image), 1, frame_rows)),
         Affine(likelihood, AccessType::kWrite, 8, 0, particle),
         Affine(weights, AccessType::kRead, 8, 0, particle),
         Affine(weights, AccessType::kWrite, 8, 0, particle),
         Affine(partial_sums, AccessType::kWrite, 8, 0, {BlockX(1)})});
    {
      GridAccess total = Affine(partial_sums, AccessType::kWrite, 8, 0, {});
      total.touched = ElementWindow(program.array(partial_sums), 8, thread_zero(1));
      program.Launch("sum_kernel", 2, grid, threads,
                     static_cast<Nanos>(kSerialNanosPerElement * static_cast<double>(blocks)),
                     {whole(partial_sums, AccessType::kRead, blocks,
                            thread_zero(static_cast<int64_t>(blocks)), program.array(partial_sums)),
                      std::move(total)});
    }
    {
      GridAccess first_u = Affine(u, AccessType::kWrite, 8, 0, {});
      first_u.touched = ElementWindow(program.array(u), 8, thread_zero(1));
      const int64_t all = static_cast<int64_t>(n);
      program.Launch(
          "normalize_weights_kernel", 3, grid, threads,
          static_cast<Nanos>(serial_ns) + RooflineNanos(spec, particles, 32 * particles),
          {Affine(partial_sums, AccessType::kRead, 8, 0, {}),
           Affine(weights, AccessType::kRead, 8, 0, particle),
           Affine(weights, AccessType::kWrite, 8, 0, particle),
           whole(weights, AccessType::kRead, n, thread_zero(all), program.array(weights)),
           whole(cdf, AccessType::kWrite, n, thread_zero(all), program.array(cdf)),
           std::move(first_u), Affine(u, AccessType::kRead, 8, 0, {}),
           Affine(u, AccessType::kWrite, 8, 0, particle)});
    }
    {
      GridAccess scan = Affine(cdf, AccessType::kRead, 8, 0, {Loop(1, n)});
      scan.touched = ElementWindow(program.array(cdf), 8, scanned);
      program.Launch(
          "find_index_kernel", 4, grid, threads,
          RooflineNanos(spec, particles * particles, 48 * particles),
          {Affine(u, AccessType::kRead, 8, 0, particle), std::move(scan),
           Indirect(array_x, AccessType::kRead, 8, ElementWindow(program.array(array_x), 8, own)),
           Indirect(array_y, AccessType::kRead, 8, ElementWindow(program.array(array_y), 8, own)),
           Affine(xj, AccessType::kWrite, 8, 0, particle),
           Affine(yj, AccessType::kWrite, 8, 0, particle)});
    }
  }
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    particlefilter,
    {"particlefilter",
     "Rodinia particlefilter (float version): four kernels a frame; the CDF one thread "
     "builds and the weights it reads move between devices every frame (3360 MB in the thesis)",
     {grid::ScaleParam()},
     MakeParticleFilter});

}  // namespace umlab
