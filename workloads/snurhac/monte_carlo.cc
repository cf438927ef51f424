// The CUDA Samples' MonteCarloMultiGPU (MonteCarlo_kernel.cu) as one
// program: rngSetupStates initialises one curandState per thread
// (rngStates[256 bx + tx]), then MonteCarloOneBlockPerOption prices option
// b in block b: its 256 threads take the option's parameters, draw PATH_N
// = 262,144 paths between them from their own states and store the
// option's expected value and confidence. Every index is affine. The
// sample splits its options over the GPUs itself; under SnuRHAC it sees
// one GPU and the runtime splits the grid (an assumption of how the thesis
// ran it).
//
// Size: 312 MB in the thesis (Table 7.10): mostly the curandStates (48
// bytes a thread); the option count follows from it, **an assumption**
// (the sample's own is 256 options). Compute, **assumptions**: 30 FLOPs a
// path (a normal draw, an exponential, the payoff) and 5,000 a curand_init
// (its skip-ahead to the thread's subsequence), at the fp32 peak.
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

constexpr uint32_t kThreads = 256;     // THREAD_N
constexpr double kPaths = 262144;      // PATH_N
constexpr uint32_t kStateBytes = 48;   // sizeof(curandState)
constexpr uint32_t kOptionBytes = 20;  // __TOptionData: S, X, T, R, V in fp32
constexpr uint32_t kValueBytes = 8;    // __TOptionValue: Expected, Confidence
constexpr double kThesisBytes = 312 * grid::kMiB;
constexpr double kFlopsPerPath = 30, kFlopsPerInit = 5000;  // assumptions (see above)

absl::StatusOr<std::unique_ptr<GridProgram>> MakeMonteCarlo(const ParamMap& params,
                                                            const ComputeSpec& spec) {
  const uint64_t options = std::max<uint64_t>(
      1, static_cast<uint64_t>(kThesisBytes * params.Double("scale") /
                               (kThreads * kStateBytes + kOptionBytes + kValueBytes)));
  grid::GridProgramBuilder program(absl::StrFormat("MonteCarloMultiGPU (%d options)", options));
  const uint64_t threads = options * kThreads;
  const int states = program.Array("rngStates", threads * kStateBytes, false, false);
  const int data = program.Array("d_OptionData", options * kOptionBytes, true, false);
  const int value = program.Array("d_CallValue", options * kValueBytes, false, true);
  const std::vector<AffineTerm> thread = {BlockX(kThreads), ThreadX(1)};
  const double state_bytes = static_cast<double>(threads) * kStateBytes;
  program.Launch("rngSetupStates", 1, grid::Blocks(options), Dim3{kThreads, 1, 1},
                 RooflineNanos(spec, kFlopsPerInit * static_cast<double>(threads), state_bytes),
                 {Affine(states, AccessType::kWrite, kStateBytes, 0, thread)});
  program.Launch(
      "MonteCarloOneBlockPerOption", 2, grid::Blocks(options), Dim3{kThreads, 1, 1},
      RooflineNanos(spec, kFlopsPerPath * kPaths * static_cast<double>(options), state_bytes),
      {Affine(states, AccessType::kRead, kStateBytes, 0, thread),
       Affine(data, AccessType::kRead, kOptionBytes, 0, {BlockX(1)}),
       Affine(value, AccessType::kWrite, kValueBytes, 0, {BlockX(1)})});
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    montecarlo, {"montecarlo",
                 "CUDA Samples MonteCarloMultiGPU: per-thread RNG states, one option per block, "
                 "every index affine (312 MB in the thesis)",
                 {grid::ScaleParam()},
                 MakeMonteCarlo});

}  // namespace umlab
