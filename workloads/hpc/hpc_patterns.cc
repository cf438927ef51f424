// HPC and micro access patterns, the classes UVM studies use to contrast
// with DNN training (and the natural ground of the driver's tree
// prefetcher): streaming vector ops, a 2D stencil with halo rows, a tiled
// GEMM, a random gather, and a pointer-chasing traversal. Each is a
// TensorProgram: arrays allocated once through the caching-allocator model,
// then `iterations` repetitions of its kernels.
//
//   stream     STREAM's copy, scale, add and triad over three fp64 arrays
//              (McCalpin): purely sequential, 2-3 arrays per kernel.
//   stencil2d  Jacobi 5-point sweeps over an n x n fp64 grid, ping-pong
//              between two grids; a sweep's thread blocks each own a band of
//              `band` rows and read one halo row above and below it.
//   gemm       C = A B on n x n fp32 matrices in a tile-contiguous (blocked)
//              layout; thread block (i, j) reads A(i, k) and B(k, j) for
//              every k, then writes C(i, j): B is re-read by every row of
//              tiles, the reuse pattern that thrashes under oversubscription.
//   gather     y[i] = table[idx[i]] with uniformly random rows: no locality
//              beyond a row.
//   graph      a pointer chase over `nodes` 64-byte nodes linked in a random
//              cyclic order: every step depends on the previous one.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "workloads/tensor_program.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

constexpr AccessType kRead = AccessType::kRead;
constexpr AccessType kWrite = AccessType::kWrite;

// The program of one pattern, and its one-line description.
class PatternWorkload : public Workload {
 public:
  PatternWorkload(std::string summary, std::shared_ptr<const TensorProgram> program)
      : summary_(std::move(summary)), program_(std::move(program)) {}
  std::unique_ptr<EventSource> Open() const override { return OpenTensorProgram(program_); }
  std::string Describe() const override {
    std::string text = absl::StrCat(program_->workload, ": ", summary_, "\n");
    absl::StatusOr<ProgramFootprint> f = MeasureFootprint(program_);
    if (!f.ok()) return absl::StrCat(text, "  cannot run: ", f.status().message(), "\n");
    absl::StrAppendFormat(&text, "  arrays            %s\n", FormatBytes(f->data_bytes));
    absl::StrAppendFormat(&text, "  peak reserved     %s (the footprint)\n",
                          FormatBytes(f->peak_reserved_bytes));
    absl::StrAppendFormat(&text, "  kernels           %d per iteration\n",
                          f->kernels_per_iteration);
    absl::StrAppendFormat(&text, "  compute           %.3f ms per iteration (roofline)\n",
                          static_cast<double>(f->compute_ns_per_iteration) / 1e6);
    return text;
  }

 private:
  std::string summary_;
  std::shared_ptr<const TensorProgram> program_;
};

// Reads a count parameter; its declared range (at least 1) makes it unsigned.
uint64_t Count(const ParamMap& params, const char* name) {
  return static_cast<uint64_t>(params.Int(name));
}

// The shared skeleton: arrays allocated and initialised in setup, the
// iteration's kernels appended by `body`.
template <typename Body>
absl::StatusOr<std::unique_ptr<Workload>> Build(const char* name, const ParamMap& params,
                                                const ComputeSpec& spec, std::string summary,
                                                Body body) {
  auto program = std::make_shared<TensorProgram>();
  program->workload = name;
  program->iterations = static_cast<int>(params.Int("iterations"));  // Iterations()'s range
  TensorProgramBuilder build(*program, spec);
  auto array = [&](const std::string& array_name, uint64_t bytes) {
    build.IntoSetup();
    const int tensor = build.Tensor(array_name, bytes, TensorRole::kData);
    build.Allocate(tensor);
    build.Launch("init_" + array_name, 0, false, {{tensor, kWrite}});
    return tensor;
  };
  if (absl::Status built = body(build, array); !built.ok()) return built;
  return std::unique_ptr<Workload>(new PatternWorkload(std::move(summary), std::move(program)));
}

ParamInfo Iterations() {
  return {"iterations", ParamType::kInt, "3", "repetitions of the pattern's kernels",
          ParamRange::Closed(1, 1'000'000)};
}

absl::StatusOr<std::unique_ptr<Workload>> MakeStream(const ParamMap& params,
                                                     const ComputeSpec& spec) {
  const uint64_t n = Count(params, "elements");
  const uint64_t bytes = n * 8;
  return Build("stream", params, spec,
               absl::StrFormat("STREAM copy/scale/add/triad over 3 x %d fp64 elements", n),
               [&](TensorProgramBuilder& b, auto array) -> absl::Status {
                 const int x = array("a", bytes), y = array("b", bytes), z = array("c", bytes);
                 b.IntoIteration();
                 b.IterationBegin();
                 const double e = static_cast<double>(n);
                 b.Launch("stream_copy", 0, false, {{x, kRead}, {z, kWrite}});
                 b.Launch("stream_scale", e, false, {{z, kRead}, {y, kWrite}});
                 b.Launch("stream_add", e, false, {{x, kRead}, {y, kRead}, {z, kWrite}});
                 b.Launch("stream_triad", 2 * e, false, {{y, kRead}, {z, kRead}, {x, kWrite}});
                 return absl::OkStatus();
               });
}

absl::StatusOr<std::unique_ptr<Workload>> MakeStencil(const ParamMap& params,
                                                      const ComputeSpec& spec) {
  const uint64_t n = Count(params, "n");
  const uint64_t band = Count(params, "band");
  const uint64_t row = n * 8;
  return Build(
      "stencil2d", params, spec,
      absl::StrFormat("Jacobi 5-point sweeps over a %dx%d fp64 grid, bands of %d rows with "
                      "one halo row each side, two sweeps (ping-pong) per iteration",
                      n, n, band),
      [&](TensorProgramBuilder& b, auto array) -> absl::Status {
        const int grids[2] = {array("grid0", n * row), array("grid1", n * row)};
        b.IntoIteration();
        b.IterationBegin();
        for (int sweep = 0; sweep < 2; ++sweep) {
          const int src = grids[sweep], dst = grids[1 - sweep];
          std::vector<KernelAccess> accesses;
          for (uint64_t r0 = 0; r0 < n; r0 += band) {
            const uint64_t r1 = std::min(n, r0 + band);
            const uint64_t lo = r0 == 0 ? 0 : r0 - 1, hi = std::min(n, r1 + 1);
            accesses.push_back({src, kRead, lo * row, (hi - lo) * row});
            accesses.push_back({dst, kWrite, r0 * row, (r1 - r0) * row});
          }
          const double points = static_cast<double>(n) * static_cast<double>(n);
          b.Launch(absl::StrCat("jacobi_sweep_", sweep), 5 * points, false,
                   std::move(accesses), 16 * points);
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::unique_ptr<Workload>> MakeGemm(const ParamMap& params,
                                                   const ComputeSpec& spec) {
  const uint64_t n = Count(params, "n");
  const uint64_t tile = Count(params, "tile");
  // n and tile each have a range; that one divides the other is checked here.
  if (n % tile != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("workload gemm: n=%d must be a multiple of tile=%d", n, tile));
  }
  const uint64_t tiles = n / tile, tile_bytes = tile * tile * 4;
  return Build(
      "gemm", params, spec,
      absl::StrFormat("C = A B, %dx%d fp32 in %dx%d tiles (blocked layout)", n, n, tile,
                      tile),
      [&](TensorProgramBuilder& b, auto array) -> absl::Status {
        const uint64_t bytes = n * n * 4;
        const int a = array("A", bytes), m = array("B", bytes), c = array("C", bytes);
        b.IntoIteration();
        b.IterationBegin();
        std::vector<KernelAccess> accesses;
        auto at = [&](uint64_t i, uint64_t j) { return (i * tiles + j) * tile_bytes; };
        for (uint64_t i = 0; i < tiles; ++i) {
          for (uint64_t j = 0; j < tiles; ++j) {
            for (uint64_t k = 0; k < tiles; ++k) {
              accesses.push_back({a, kRead, at(i, k), tile_bytes});
              accesses.push_back({m, kRead, at(k, j), tile_bytes});
            }
            accesses.push_back({c, kWrite, at(i, j), tile_bytes});
          }
        }
        const double nd = static_cast<double>(n);
        b.Launch("sgemm_tiled", 2 * nd * nd * nd, false, std::move(accesses), 3 * nd * nd * 4);
        return absl::OkStatus();
      });
}

absl::StatusOr<std::unique_ptr<Workload>> MakeGather(const ParamMap& params,
                                                     const ComputeSpec& spec) {
  const uint64_t rows = Count(params, "rows");
  const uint64_t row_bytes = Count(params, "row_bytes");
  const uint64_t lookups = Count(params, "lookups");
  return Build(
      "gather", params, spec,
      absl::StrFormat("y[i] = table[idx[i]]: %d uniform lookups of %d-byte rows in a %d-row "
                      "table",
                      lookups, row_bytes, rows),
      [&](TensorProgramBuilder& b, auto array) -> absl::Status {
        const int table = array("table", rows * row_bytes);
        const int idx = array("idx", lookups * 8);
        const int y = array("y", lookups * row_bytes);
        KernelAccess gathered{table, kRead};
        gathered.gather = b.Gather(GatherSpec{GatherKind::kUniform, rows, row_bytes,
                                              lookups, 0, static_cast<uint64_t>(params.Int("seed"))});
        b.IntoIteration();
        b.IterationBegin();
        b.Launch("gather_rows", 0, false, {{idx, kRead}, gathered, {y, kWrite}});
        return absl::OkStatus();
      });
}

absl::StatusOr<std::unique_ptr<Workload>> MakeGraph(const ParamMap& params,
                                                    const ComputeSpec& spec) {
  const uint64_t nodes = Count(params, "nodes");
  const uint64_t steps = Count(params, "steps");
  constexpr uint64_t kNodeBytes = 64;  // next pointer, key, payload: one cache line
  return Build(
      "graph", params, spec,
      absl::StrFormat("pointer chase: %d steps over %d 64-byte nodes in random cyclic order",
                      steps, nodes),
      [&](TensorProgramBuilder& b, auto array) -> absl::Status {
        const int graph = array("nodes", nodes * kNodeBytes);
        KernelAccess chase{graph, kRead};
        chase.gather = b.Gather(GatherSpec{GatherKind::kChase, nodes, kNodeBytes, steps, 0,
                                           static_cast<uint64_t>(params.Int("seed"))});
        b.IntoIteration();
        b.IterationBegin();
        // Roofline time from the bytes moved; the dependency chain's latency
        // is not modelled.
        b.Launch("pointer_chase", 0, false, {chase});
        return absl::OkStatus();
      });
}

ParamInfo Seed() { return {"seed", ParamType::kInt, "1", "seed of the random order"}; }

}  // namespace

UMLAB_REGISTER_WORKLOAD(stream, {"stream", "STREAM copy/scale/add/triad (sequential)",
                                 {{"elements", ParamType::kInt, "134217728",
                                   "fp64 elements per array (1 GiB each by default)",
                                   ParamRange::Closed(1, 1ll << 36)},
                                  Iterations()},
                                 MakeStream});
UMLAB_REGISTER_WORKLOAD(stencil2d, {"stencil2d", "2D Jacobi stencil with halo rows",
                                    {{"n", ParamType::kInt, "16384", "grid side (fp64)",
                                      ParamRange::Closed(4, 1 << 20)},
                                     {"band", ParamType::kInt, "64",
                                      "rows per thread-block band", ParamRange::Closed(1, 1 << 20)},
                                     Iterations()},
                                    MakeStencil});
UMLAB_REGISTER_WORKLOAD(gemm, {"gemm", "tiled GEMM (blocked layout)",
                               {{"n", ParamType::kInt, "16384", "matrix side (fp32)",
                                 ParamRange::Closed(1, 1 << 18)},
                                {"tile", ParamType::kInt, "1024", "tile side (divides n)",
                                 ParamRange::Closed(1, 1 << 18)},
                                Iterations()},
                               MakeGemm});
UMLAB_REGISTER_WORKLOAD(gather, {"gather", "random row gather (irregular)",
                                 {{"rows", ParamType::kInt, "16777216", "table rows",
                                   ParamRange::Closed(1, 1ll << 36)},
                                  {"row_bytes", ParamType::kInt, "256", "bytes per row",
                                   ParamRange::Closed(1, 1 << 20)},
                                  {"lookups", ParamType::kInt, "1048576", "rows per kernel",
                                   ParamRange::Closed(1, 1 << 26)},
                                  Seed(), Iterations()},
                                 MakeGather});
UMLAB_REGISTER_WORKLOAD(graph, {"graph", "pointer-chasing traversal (dependent, irregular)",
                                {{"nodes", ParamType::kInt, "33554432", "64-byte nodes",
                                  ParamRange::Closed(1, 1ll << 34)},
                                 {"steps", ParamType::kInt, "1048576", "steps per kernel",
                                  ParamRange::Closed(1, 1 << 26)},
                                 Seed(), Iterations()},
                                MakeGraph});

}  // namespace umlab
