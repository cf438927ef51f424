// GPT-2 language-model training (HuggingFace GPT2LMHeadModel), sizes from
// Radford et al. 2019 Table 2 and the released configs:
//   small  12 layers, d_model  768, 12 heads   (124 M parameters)
//   medium 24 layers, d_model 1024, 16 heads   (355 M)
//   large  36 layers, d_model 1280, 20 heads   (774 M)
//   xl     48 layers, d_model 1600, 25 heads   (1558 M; "1.5 B" in the paper)
// vocabulary 50257, context 1024, MLP 4 x d_model, GELU, pre-LayerNorm,
// dropout 0.1 on embeddings, attention probabilities and residual branches,
// lm_head tied to the token embedding (wte), so its gradient accumulates.
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/transformer_block.h"

namespace umlab {
namespace {

struct Gpt2Size {
  const char* name;
  const char* description;
  int layers, hidden, heads;
};

constexpr uint64_t kVocabulary = 50257;
constexpr uint64_t kContext = 1024;
constexpr double kDropout = 0.1;

constexpr Gpt2Size kSizes[] = {
    {"gpt2-small", "GPT-2 small (124 M) LM training", 12, 768, 12},
    {"gpt2-medium", "GPT-2 medium (355 M) LM training", 24, 1024, 16},
    {"gpt2-large", "GPT-2 large (774 M) LM training", 36, 1280, 20},
    {"gpt2-xl", "GPT-2 XL (1.5 B) LM training", 48, 1600, 25},
};

std::vector<ParamInfo> Gpt2Params(const Gpt2Size&) {
  return SequenceParams(3, kContext, "tokens per sample (at most the 1024-token context)");
}

absl::StatusOr<std::string> BuildGpt2(const Gpt2Size& size, TrainingGraph& g, uint64_t t) {
  const uint64_t b = g.options().batch;
  const uint64_t c = size.hidden;
  const uint64_t rows = b * t;
  const EmbeddingLayer wte = g.MakeEmbedding("transformer.wte", kVocabulary, c);
  const EmbeddingLayer wpe = g.MakeEmbedding("transformer.wpe", kContext, c);

  g.BeginIteration();
  const int ids = g.LoadInput("input_ids", rows * 8);  // int64
  const int labels = g.LoadInput("labels", rows * 8);
  int x = g.Embedding(wte, ids, rows, TokenRows(g, kVocabulary, c, rows));
  const int positions = g.Embedding(wpe, ids, rows, PositionRows(g, t, c));
  x = g.Add(x, positions, "transformer.embed_add", rows * c);
  x = g.Dropout(x, "transformer.drop", rows * c, kDropout);

  TransformerShape shape{b, t, c, static_cast<uint64_t>(size.heads), 4 * c,
                         /*pre_norm=*/true, /*fused_qkv=*/true, kDropout, kDropout,
                         /*kv_cache_copies=*/true, /*gelu_tanh_composed=*/true};
  x = TransformerLayers(g, "transformer.h.", size.layers, shape, x);
  const NormLayer ln_f = g.MakeLayerNorm("transformer.ln_f", c);
  x = g.LayerNorm(ln_f, x, rows);
  // lm_head shares wte's weight (tie_word_embeddings) and has no bias.
  const int loss = TiedLanguageModelLoss(g, "lm_head", wte, -1, x, labels, rows);
  g.Backward(loss);
  g.Step();
  return absl::StrFormat(
      "GPT-2 %s language-model training: %d layers, d_model %d, %d heads, vocabulary "
      "%d, %d tokens per sample, tied lm_head, dropout 0.1",
      size.name + 5, size.layers, size.hidden, size.heads, kVocabulary, t);
}

}  // namespace

UMLAB_REGISTER_MODEL_FAMILY(gpt2, kSizes, Gpt2Params, SequenceFamily(BuildGpt2));

}  // namespace umlab
