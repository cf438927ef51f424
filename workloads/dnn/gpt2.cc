// GPT-2 language-model training (HuggingFace GPT2LMHeadModel), sizes from
// Radford et al. 2019 Table 2 and the released configs:
//   small  12 layers, d_model  768, 12 heads   (124 M parameters)
//   medium 24 layers, d_model 1024, 16 heads   (355 M)
//   large  36 layers, d_model 1280, 20 heads   (774 M)
//   xl     48 layers, d_model 1600, 25 heads   (1558 M; "1.5 B" in the paper)
// vocabulary 50257, context 1024, MLP 4 x d_model, GELU, pre-LayerNorm,
// dropout 0.1 on embeddings, attention probabilities and residual branches,
// lm_head tied to the token embedding (wte), so its gradient accumulates.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/transformer_block.h"

namespace umlab {
namespace {

struct Gpt2Size {
  const char* name;
  int layers, hidden, heads;
};

constexpr uint64_t kVocabulary = 50257;
constexpr uint64_t kContext = 1024;
constexpr double kDropout = 0.1;
// Word frequencies are Zipfian (exponent about 1): the rows of wte a batch
// touches are drawn from a power law.
constexpr double kTokenZipfExponent = 1.0;

std::vector<ParamInfo> Gpt2Params() {
  std::vector<ParamInfo> params = TrainingParams(3, 3, Optimizer::kAdam);
  params.push_back({"seq", ParamType::kInt, absl::StrCat(kContext),
                    "tokens per sample (at most the 1024-token context)",
                    ParamRange::Closed(1, kContext)});
  return params;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeGpt2(const Gpt2Size& size,
                                                   const ParamMap& params,
                                                   const ComputeSpec& spec) {
  const std::string name = size.name;
  absl::StatusOr<TrainingOptions> options = TrainingOptionsFromParams(params, name);
  if (!options.ok()) return options.status();
  const uint64_t seq = static_cast<uint64_t>(params.Int("seq"));
  return MakeDnnWorkload(name, *options, spec, [&](TrainingGraph& g) -> absl::StatusOr<std::string> {
    const uint64_t b = g.options().batch;
    const uint64_t t = seq;
    const uint64_t c = size.hidden;
    const uint64_t rows = b * t;
    const EmbeddingLayer wte = g.MakeEmbedding("transformer.wte", kVocabulary, c);
    const EmbeddingLayer wpe = g.MakeEmbedding("transformer.wpe", kContext, c);

    g.BeginIteration();
    const int ids = g.LoadInput("input_ids", rows * 8);  // int64
    const int labels = g.LoadInput("labels", rows * 8);
    GatherSpec tokens{GatherKind::kPowerLaw, kVocabulary, c * g.element_bytes(), rows,
                      kTokenZipfExponent, g.options().seed};
    KernelAccess token_rows;
    token_rows.gather = g.builder().Gather(tokens);
    int x = g.Embedding(wte, ids, rows, token_rows);
    // Positions 0..T-1: the first T rows of wpe, the same for every sample.
    KernelAccess position_rows;
    position_rows.size = t * c * g.element_bytes();
    const int positions = g.Embedding(wpe, ids, rows, position_rows);
    x = g.Add(x, positions, "transformer.embed_add", rows * c);
    x = g.Dropout(x, "transformer.drop", rows * c, kDropout);

    TransformerShape shape{b, t, c, static_cast<uint64_t>(size.heads), 4 * c,
                           /*pre_norm=*/true, /*fused_qkv=*/true, kDropout, kDropout};
    for (int l = 0; l < size.layers; ++l) {
      x = TransformerLayer(g, absl::StrCat("transformer.h.", l), shape, x);
    }
    const NormLayer ln_f = g.MakeLayerNorm("transformer.ln_f", c);
    x = g.LayerNorm(ln_f, x, rows);
    // lm_head shares wte's weight (tie_word_embeddings).
    const LinearLayer lm_head{"lm_head", c, kVocabulary, wte.weight, -1};
    const int logits = g.Linear(lm_head, x, rows);
    const int loss = g.CrossEntropy(logits, labels, "loss", rows, kVocabulary);
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "GPT-2 %s language-model training: %d layers, d_model %d, %d heads, vocabulary "
        "%d, %d tokens per sample, tied lm_head, dropout 0.1",
        size.name + 5, size.layers, size.hidden, size.heads, kVocabulary, t);
  });
}

constexpr Gpt2Size kSmall{"gpt2-small", 12, 768, 12};
constexpr Gpt2Size kMedium{"gpt2-medium", 24, 1024, 16};
constexpr Gpt2Size kLarge{"gpt2-large", 36, 1280, 20};
constexpr Gpt2Size kXl{"gpt2-xl", 48, 1600, 25};

absl::StatusOr<std::unique_ptr<Workload>> MakeSmall(const ParamMap& p, const ComputeSpec& s) {
  return MakeGpt2(kSmall, p, s);
}
absl::StatusOr<std::unique_ptr<Workload>> MakeMedium(const ParamMap& p, const ComputeSpec& s) {
  return MakeGpt2(kMedium, p, s);
}
absl::StatusOr<std::unique_ptr<Workload>> MakeLarge(const ParamMap& p, const ComputeSpec& s) {
  return MakeGpt2(kLarge, p, s);
}
absl::StatusOr<std::unique_ptr<Workload>> MakeXl(const ParamMap& p, const ComputeSpec& s) {
  return MakeGpt2(kXl, p, s);
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(gpt2_small, {"gpt2-small", "GPT-2 small (124 M) LM training",
                                     Gpt2Params(), MakeSmall});
UMLAB_REGISTER_WORKLOAD(gpt2_medium, {"gpt2-medium", "GPT-2 medium (355 M) LM training",
                                      Gpt2Params(), MakeMedium});
UMLAB_REGISTER_WORKLOAD(gpt2_large, {"gpt2-large", "GPT-2 large (774 M) LM training",
                                     Gpt2Params(), MakeLarge});
UMLAB_REGISTER_WORKLOAD(gpt2_xl, {"gpt2-xl", "GPT-2 XL (1.5 B) LM training", Gpt2Params(),
                                  MakeXl});

}  // namespace umlab
