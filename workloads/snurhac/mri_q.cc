// Parboil's mri-q (cuda version): the Q matrix of a non-Cartesian MRI
// reconstruction. ComputePhiMag_GPU (blocks of 512 threads, one per k-space
// sample k) stores phiMag[k] = phiR[k]^2 + phiI[k]^2; the host reads
// phiMag back and packs the samples into kValues; then ComputeQ_GPU runs
// once per chunk of KERNEL_Q_K_ELEMS_PER_GRID = 1024 samples (copied to
// constant memory before each launch), with blocks of 256 threads, one per
// voxel t: it reads x[t], y[t], z[t], Qr[t], Qi[t], adds the chunk's
// contributions and stores Qr[t] and Qi[t]. Every global index is affine.
//
// The thesis says mri-q's kernels move the same objects between GPUs at
// every launch (§7.3.2). In the source every ComputeQ_GPU launch has the
// same grid, so SnuRHAC's split gives each device the same voxels each
// time: x, y, z stay where they were read and Qr, Qi where they were
// written. What moves between kernels is phiMag, to the host, and the
// chunk of constant memory, which this model does not carry (grid programs
// have no copies between kernels, docs/snurhac.md): the program is modelled
// as the source runs it, and that repeat movement does not appear.
//
// Size: 502 MB in the thesis (Table 7.10). **An assumption**: Parboil's
// large input's ratio of voxels to samples (262,144 to 2,048) kept while
// both grow to 502 MB: 204,658 samples, 26.2 million voxels, 200 launches
// of ComputeQ_GPU. Compute, **an assumption**: 20 FLOPs a (voxel, sample)
// pair (the phase's 6, sine and cosine counted 4 each, two multiply-adds)
// at the fp32 peak; 3 a sample for phiMag.
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;
using grid::ThreadX;

constexpr uint32_t kPhiThreads = 512;                 // KERNEL_PHI_MAG_THREADS_PER_BLOCK
constexpr uint32_t kQThreads = 256;                   // KERNEL_Q_THREADS_PER_BLOCK
constexpr uint64_t kChunk = 1024;                     // KERNEL_Q_K_ELEMS_PER_GRID
constexpr uint64_t kVoxelsPerSample = 262144 / 2048;  // Parboil's large input
constexpr double kThesisBytes = 502 * grid::kMiB;
constexpr double kFlopsPerPair = 20;  // an assumption (see above)

absl::StatusOr<std::unique_ptr<GridProgram>> MakeMriQ(const ParamMap& params,
                                                      const ComputeSpec& spec) {
  // Three fp32 arrays per sample (phiR, phiI, phiMag), five per voxel.
  const uint64_t samples =
      std::max<uint64_t>(kChunk, static_cast<uint64_t>(kThesisBytes * params.Double("scale") /
                                                       (4.0 * (3 + 5 * kVoxelsPerSample))) /
                                     2 * 2);
  const uint64_t voxels = samples * kVoxelsPerSample;  // samples even: a multiple of 256
  grid::GridProgramBuilder program(
      absl::StrFormat("mri-q (%d samples, %d voxels)", samples, voxels));
  const int phi_r = program.Array("phiR", samples * 4, true, false);
  const int phi_i = program.Array("phiI", samples * 4, true, false);
  const int phi_mag = program.Array("phiMag", samples * 4, false, true);
  const int x = program.Array("x", voxels * 4, true, false);
  const int y = program.Array("y", voxels * 4, true, false);
  const int z = program.Array("z", voxels * 4, true, false);
  // Qr and Qi are cleared on the device (cudaMemset): not copied in.
  const int qr = program.Array("Qr", voxels * 4, false, true);
  const int qi = program.Array("Qi", voxels * 4, false, true);

  const std::vector<AffineTerm> sample = {BlockX(kPhiThreads), ThreadX(1)};
  program.Launch("ComputePhiMag_GPU", 1, grid::Blocks(grid::BlocksFor(samples, kPhiThreads)),
                 Dim3{kPhiThreads, 1, 1},
                 RooflineNanos(spec, 3.0 * static_cast<double>(samples), 12.0 * samples),
                 {Affine(phi_r, AccessType::kRead, 4, 0, sample),
                  Affine(phi_i, AccessType::kRead, 4, 0, sample),
                  Affine(phi_mag, AccessType::kWrite, 4, 0, sample)});
  const std::vector<AffineTerm> voxel = {BlockX(kQThreads), ThreadX(1)};
  for (uint64_t base = 0; base < samples; base += kChunk) {
    const double chunk = static_cast<double>(std::min(kChunk, samples - base));
    // The launches differ only by a scalar (the chunk's first sample): one
    // execution id.
    program.Launch(
        "ComputeQ_GPU", 2, grid::Blocks(voxels / kQThreads), Dim3{kQThreads, 1, 1},
        RooflineNanos(spec, kFlopsPerPair * chunk * static_cast<double>(voxels), 20.0 * voxels),
        {Affine(x, AccessType::kRead, 4, 0, voxel), Affine(y, AccessType::kRead, 4, 0, voxel),
         Affine(z, AccessType::kRead, 4, 0, voxel), Affine(qr, AccessType::kRead, 4, 0, voxel),
         Affine(qi, AccessType::kRead, 4, 0, voxel), Affine(qr, AccessType::kWrite, 4, 0, voxel),
         Affine(qi, AccessType::kWrite, 4, 0, voxel)});
  }
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    mri_q, {"mri-q",
            "Parboil mri-q: phiMag, then one ComputeQ launch per 1024 k-space samples over "
            "the same voxels (502 MB in the thesis)",
            {grid::ScaleParam()},
            MakeMriQ});

}  // namespace umlab
