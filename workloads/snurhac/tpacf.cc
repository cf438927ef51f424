// Parboil's tpacf (two-point angular correlation): histograms of angular
// distances between a set of observed points and `sets` random sets of
// points on the sky, all in three fp32 coordinate arrays (x, y, z) that
// hold the data set followed by the random sets, N points each. Its kernel
// runs 2 sets + 1 thread blocks: block 0 correlates the data set with
// itself, block b in 1..sets the data set with random set b, and block
// sets + b random set b with itself; each writes its own histogram.
//
// Which points a block reads depends on its index through branches and
// loop bounds computed from it, which MAPA cannot analyse: the thesis
// names tpacf as an application whose memory operations static analysis
// mostly misses (§7.3.2), so only the histogram stores are affine here.
// The coordinate arrays are only read, so they carry the read-only flag
// and dynamic prefetching fetches them a block at a time.
//
// Size: 609 MB in the thesis (Table 7.10). `sets` (100) is an assumption:
// the thesis gives only the footprint, from which N follows. Each block
// writes NUM_BINS (20, Parboil's) 8-byte counters. Compute: an assumption
// of 10 operations per pair of points (a 3-component dot product and a
// binary search over the bins) at the fp32 peak.
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
using grid::Indirect;

constexpr uint32_t kThreads = 256;  // Parboil tpacf's BLOCK_SIZE
constexpr int kBins = 20;           // Parboil tpacf's NUM_BINS
constexpr double kThesisBytes = 609 * grid::kMiB;
constexpr double kOpsPerPair = 10;  // an assumption (see above)

absl::StatusOr<std::unique_ptr<GridProgram>> MakeTpacf(const ParamMap& params,
                                                       const ComputeSpec& spec) {
  const uint64_t sets = static_cast<uint64_t>(params.Int("sets"));
  const uint64_t points = std::max<uint64_t>(
      kThreads, static_cast<uint64_t>(kThesisBytes * params.Double("scale") / (12.0 * (sets + 1))));
  const uint64_t blocks = 2 * sets + 1;
  grid::GridProgramBuilder program(
      absl::StrFormat("tpacf (%d random sets of %d points)", sets, points));
  const uint64_t coordinate_bytes = (sets + 1) * points * 4;
  const int x = program.Array("x", coordinate_bytes, true, false);
  const int y = program.Array("y", coordinate_bytes, true, false);
  const int z = program.Array("z", coordinate_bytes, true, false);
  const int hists = program.Array("hists", blocks * kBins * 8, false, true);

  const double n = static_cast<double>(points);
  const double pairs =
      static_cast<double>(sets) * n * n + static_cast<double>(sets + 1) * n * n / 2;
  const Nanos compute_ns = RooflineNanos(spec, kOpsPerPair * pairs, 3.0 * coordinate_bytes);
  // The point sets blocks first .. first + extent - 1 read, in one array.
  auto sets_read = [sets, points](const GridArray& array) {
    return [sets, points, base = array.address](const GridShare& share) {
      std::vector<ByteRange> ranges;
      auto set = [&](uint64_t k) {
        ranges.push_back({base + k * points * 4, base + (k + 1) * points * 4});
      };
      const uint64_t first = share.first.x, last = share.first.x + share.extent.x;
      if (first <= sets) set(0);  // blocks 0 .. sets read the data set
      for (uint64_t b = std::max<uint64_t>(first, 1); b < last; ++b) set(b <= sets ? b : b - sets);
      return ranges;
    };
  };
  program.Launch("gen_hists", 1, grid::Blocks(blocks), Dim3{kThreads, 1, 1}, compute_ns,
                 {
                     Indirect(x, AccessType::kRead, 4, sets_read(program.array(x))),
                     Indirect(y, AccessType::kRead, 4, sets_read(program.array(y))),
                     Indirect(z, AccessType::kRead, 4, sets_read(program.array(z))),
                     // hists[b * NUM_BINS + t], t < NUM_BINS.
                     Affine(hists, AccessType::kWrite, 8, 0, {BlockX(kBins), grid::Loop(1, kBins)}),
                 });
  return program.Finish();
}

}  // namespace

UMLAB_REGISTER_GRID_WORKLOAD(
    tpacf, {"tpacf",
            "Parboil tpacf: per-block histograms over point sets chosen by block index, which "
            "MAPA cannot analyse (609 MB in the thesis)",
            {grid::ScaleParam(),
             {"sets", ParamType::kInt, "100", "random point sets (an assumption)",
              ParamRange::Closed(1, 10000)}},
            MakeTpacf});

}  // namespace umlab
