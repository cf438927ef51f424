// The CUDA Samples' binomialOptions (binomialOptions_kernel.cu): European
// options priced on a binomial tree of NUM_STEPS = 2048 steps, one option
// per thread block of THREADBLOCK_SIZE = 128 threads. Block b reads option
// b's parameters (S, X, vDt, puByDf, pdByDf: five fp32), walks the tree
// back from its leaves in shared memory and registers, and thread 0 stores
// the option's value: every global index is affine in the block index.
//
// Size: 1536 MB in the thesis (Table 7.10); the sample holds its options
// in constant memory (MAX_OPTIONS = 1024, a few KB). How the thesis grew
// it is not said: **an assumption** that the options moved to global
// memory and their count grew until parameters and results (24 bytes an
// option) fill 1536 MB, 67 million options. Compute: the tree's NUM_STEPS^2
// / 2 nodes an option at 3 FLOPs each (call = puByDf call[j + 1] + pdByDf
// call[j]) at the fp32 peak (roofline): kernel-bound, as the thesis finds
// (Table 7.11: 1.00 under every scheme).
#include <memory>

#include "absl/strings/str_format.h"
#include "workloads/grid_workload.h"
#include "workloads/snurhac/grid_access.h"
#include "workloads/snurhac/grid_builder.h"

namespace umlab {
namespace {

using grid::Affine;
using grid::BlockX;

constexpr uint32_t kThreads = 128;     // THREADBLOCK_SIZE
constexpr double kSteps = 2048;        // NUM_STEPS
constexpr uint32_t kOptionBytes = 20;  // __TOptionData: five fp32
constexpr uint32_t kValueBytes = 4;    // the option's fp32 value
constexpr double kThesisBytes = 1536 * grid::kMiB;

absl::StatusOr<std::unique_ptr<GridProgram>> MakeBinomialOptions(const ParamMap& params,
                                                                 const ComputeSpec& spec) {
  const uint64_t options = std::max<uint64_t>(
      1,
      static_cast<uint64_t>(kThesisBytes * params.Double("scale") / (kOptionBytes + kValueBytes)));
  grid::GridProgramBuilder program(absl::StrFormat("binomialOptions (%d options)", options));
  const int data = program.Array("d_OptionData", options * kOptionBytes, true, false);
  const int value = program.Array("d_CallValue", options * kValueBytes, false, true);
  program.Launch("binomialOptionsKernel", 1, grid::Blocks(options), Dim3{kThreads, 1, 1},
                 RooflineNanos(spec, 3.0 * kSteps * kSteps / 2 * static_cast<double>(options),
                               static_cast<double>(options) * (kOptionBytes + kValueBytes)),
                 {Affine(data, AccessType::kRead, kOptionBytes, 0, {BlockX(1)}),
                  Affine(value, AccessType::kWrite, kValueBytes, 0, {BlockX(1)})});
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    binomialoptions, {"binomialoptions",
                      "CUDA Samples binomialOptions: one option per block, every index affine, "
                      "compute-bound (1536 MB in the thesis)",
                      {grid::ScaleParam()},
                      MakeBinomialOptions});

}  // namespace umlab
