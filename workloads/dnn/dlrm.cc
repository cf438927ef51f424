// DLRM training (facebookresearch/dlrm, dlrm_s_pytorch.py) in the MLPerf
// configuration: 13 dense features through a bottom MLP 13-512-256-128, 26
// sparse features looked up in embedding tables of dimension 128 with the
// Criteo Kaggle cardinalities, a dot interaction of the 27 vectors (the 351
// pairs after the dense vector: 479 features), a top MLP 479-1024-1024-512-
// 256-1 with ReLU (sigmoid folded into the loss), binary cross entropy, SGD.
// The embedding tables (33.8 M rows, 17.3 GB in fp32) take most of the
// memory, as DeepUM observes.
//
// Lookups are irregular: each of the batch's one-hot ids per table is drawn
// from a seeded power law over the table's rows (popular items recur), and
// the kernels touch only those rows: EmbeddingBag forward reads them, the
// sparse gradient (sparse=True) holds one row per lookup, and the SGD step
// reads and writes the same rows. Each iteration draws new rows.
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"

namespace umlab {
namespace {

// Criteo Kaggle (Display Advertising Challenge) categorical cardinalities, as
// counted by dlrm's data_utils for the 26 sparse features.
constexpr uint64_t kTableRows[26] = {
    1460,    583,   10131227, 2202608, 305,  24,      12517, 633,    3,
    93145,   5683,  8351593,  3194,    27,   14992,   5461306, 10,   5652,
    2173,    4,     7046547,  18,      15,   286181,  105,   142572};
constexpr uint64_t kDense = 13;
constexpr uint64_t kDim = 128;
constexpr uint64_t kBottom[] = {512, 256, 128};
constexpr uint64_t kTop[] = {1024, 1024, 512, 256, 1};
// Skew of item popularity in click logs; about Zipf 1.1 in Criteo.
constexpr double kPowerLaw = 1.1;

std::vector<ParamInfo> DlrmParams() {
  std::vector<ParamInfo> params = TrainingParams(128 * 1024, 3, Optimizer::kSgd);
  params.push_back({"zipf", ParamType::kDouble, absl::StrCat(kPowerLaw),
                    "power-law exponent of the embedding row popularity",
                    ParamRange::OpenClosed(0, 10)});
  return params;
}

// Linear + ReLU layers; `last_relu` false leaves the final layer linear.
int Mlp(TrainingGraph& g, const std::string& prefix, int x, uint64_t in,
        absl::Span<const uint64_t> widths, uint64_t rows, bool last_relu) {
  for (size_t i = 0; i < widths.size(); ++i) {
    const LinearLayer layer = g.MakeLinear(absl::StrCat(prefix, ".", 2 * i), in, widths[i], true);
    x = g.Linear(layer, x, rows);
    if (i + 1 < widths.size() || last_relu) {
      x = g.Relu(x, absl::StrCat(prefix, ".", 2 * i + 1), rows * widths[i], /*inplace=*/false);
    }
    in = widths[i];
  }
  return x;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeDlrm(const ParamMap& params,
                                                   const ComputeSpec& spec) {
  const TrainingOptions options = TrainingOptionsFromParams(params);
  const double zipf = params.Double("zipf");
  return MakeDnnWorkload("dlrm", options, spec, [&](TrainingGraph& g) -> absl::StatusOr<std::string> {
    const uint64_t b = g.options().batch;
    std::vector<EmbeddingLayer> tables;
    std::vector<KernelAccess> rows;
    for (size_t i = 0; i < std::size(kTableRows); ++i) {
      tables.push_back(g.MakeEmbedding(absl::StrCat("emb_l.", i), kTableRows[i], kDim));
      KernelAccess access;
      access.gather = g.builder().Gather(GatherSpec{GatherKind::kPowerLaw, kTableRows[i],
                                                    kDim * g.element_bytes(), b, zipf,
                                                    g.options().seed});
      rows.push_back(access);
      g.MarkSparse(tables.back(), access);
    }
    g.BeginIteration();
    const int dense = g.LoadInput("dense_x", b * kDense * g.element_bytes());
    std::vector<int> indices;
    for (size_t i = 0; i < std::size(kTableRows); ++i) {
      indices.push_back(g.LoadInput(absl::StrCat("lS_i.", i), b * 8));
    }
    const int labels = g.LoadInput("labels", b * g.element_bytes());
    int x = Mlp(g, "bot_l", dense, kDense, kBottom, b, /*last_relu=*/true);
    g.Retain(x);  // in T and again in R
    std::vector<int> features = {x};
    std::vector<uint64_t> widths = {kDim};
    for (size_t i = 0; i < tables.size(); ++i) {
      features.push_back(g.Embedding(tables[i], indices[i], b, rows[i]));
      widths.push_back(kDim);
    }
    const uint64_t count = features.size();
    const int t = g.Concat(features, widths, "interact.T", b);
    const int pairs = g.DotInteraction(t, "interact", b, count, kDim);
    const uint64_t pair_count = count * (count - 1) / 2;
    const int r = g.Concat({x, pairs}, {kDim, pair_count}, "interact.R", b);
    const int logits = Mlp(g, "top_l", r, kDim + pair_count, kTop, b, /*last_relu=*/false);
    const int loss = g.BinaryCrossEntropy(logits, labels, "loss", b);
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "DLRM (MLPerf config, Criteo Kaggle tables) CTR training: bottom MLP 13-512-256-128, "
        "26 embedding tables of dim 128 (%d rows in all), dot interaction, top MLP "
        "479-1024-1024-512-256-1, power-law lookups (exponent %.2f), sparse SGD on tables",
        [] {
          uint64_t total = 0;
          for (uint64_t n : kTableRows) total += n;
          return total;
        }(),
        zipf);
  });
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(dlrm, {"dlrm", "DLRM (MLPerf config, Criteo Kaggle) CTR training",
                               DlrmParams(), MakeDlrm});

}  // namespace umlab
