// BERT masked-language-model training (HuggingFace BertForMaskedLM), sizes
// from Devlin et al. 2019:
//   base  12 layers, hidden  768, 12 heads, intermediate 3072
//   large 24 layers, hidden 1024, 16 heads, intermediate 4096
// WordPiece vocabulary 30522, 512 positions, 2 token types, GELU,
// post-LayerNorm, dropout 0.1 on hidden states and attention probabilities.
// The MLM head is dense + GELU + LayerNorm, then a decoder tied to the word
// embeddings with its own bias. BertForMaskedLM has no pooler and no
// next-sentence head: the published 110 M / 340 M include them (see
// docs/workloads.md for the comparison).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/transformer_block.h"

namespace umlab {
namespace {

struct BertSize {
  const char* name;
  int layers, hidden, heads, intermediate;
};

constexpr uint64_t kVocabulary = 30522;
constexpr uint64_t kPositions = 512;
constexpr uint64_t kTokenTypes = 2;
constexpr double kDropout = 0.1;
constexpr double kTokenZipfExponent = 1.0;

std::vector<ParamInfo> BertParams(int default_batch) {
  std::vector<ParamInfo> params = TrainingParams(default_batch, 3, Optimizer::kAdam);
  // At most the position table's rows.
  params.push_back({"seq", ParamType::kInt, "512", "tokens per sample (at most 512)",
                    ParamRange::Closed(1, kPositions)});
  return params;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeBert(const BertSize& size,
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
    const uint64_t element = g.element_bytes();
    const EmbeddingLayer words = g.MakeEmbedding("bert.embeddings.word_embeddings", kVocabulary, c);
    const EmbeddingLayer positions =
        g.MakeEmbedding("bert.embeddings.position_embeddings", kPositions, c);
    const EmbeddingLayer types =
        g.MakeEmbedding("bert.embeddings.token_type_embeddings", kTokenTypes, c);
    const NormLayer embed_norm = g.MakeLayerNorm("bert.embeddings.LayerNorm", c);

    g.BeginIteration();
    const int ids = g.LoadInput("input_ids", rows * 8);
    const int type_ids = g.LoadInput("token_type_ids", rows * 8);
    const int labels = g.LoadInput("labels", rows * 8);
    KernelAccess word_rows;
    word_rows.gather = g.builder().Gather(GatherSpec{GatherKind::kPowerLaw, kVocabulary,
                                                     c * element, rows, kTokenZipfExponent,
                                                     g.options().seed});
    KernelAccess position_rows;
    position_rows.size = t * c * element;
    KernelAccess all_rows;  // both token-type rows
    int x = g.Embedding(words, ids, rows, word_rows);
    x = g.Add(x, g.Embedding(types, type_ids, rows, all_rows), "bert.embeddings.add_types",
              rows * c);
    x = g.Add(x, g.Embedding(positions, ids, rows, position_rows),
              "bert.embeddings.add_positions", rows * c);
    x = g.LayerNorm(embed_norm, x, rows);
    x = g.Dropout(x, "bert.embeddings.dropout", rows * c, kDropout);

    TransformerShape shape{b, t, c, static_cast<uint64_t>(size.heads),
                           static_cast<uint64_t>(size.intermediate),
                           /*pre_norm=*/false, /*fused_qkv=*/false, kDropout, kDropout};
    for (int l = 0; l < size.layers; ++l) {
      x = TransformerLayer(g, absl::StrCat("bert.encoder.layer.", l), shape, x);
    }
    // MLM head: transform, then the decoder tied to the word embeddings.
    const LinearLayer transform = g.MakeLinear("cls.predictions.transform.dense", c, c, true);
    const NormLayer transform_norm = g.MakeLayerNorm("cls.predictions.transform.LayerNorm", c);
    const int decoder_bias = g.MakeParameter("cls.predictions.bias", kVocabulary);
    x = g.Gelu(g.Linear(transform, x, rows), "cls.predictions.transform.act", rows * c);
    x = g.LayerNorm(transform_norm, x, rows);
    const LinearLayer decoder{"cls.predictions.decoder", c, kVocabulary, words.weight,
                              decoder_bias};
    const int logits = g.Linear(decoder, x, rows);
    const int loss = g.CrossEntropy(logits, labels, "loss", rows, kVocabulary);
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "BERT %s masked-LM training: %d layers, hidden %d, %d heads, intermediate %d, "
        "vocabulary %d, %d tokens per sample, dropout 0.1",
        size.name + 5, size.layers, size.hidden, size.heads, size.intermediate, kVocabulary,
        t);
  });
}

constexpr BertSize kBase{"bert-base", 12, 768, 12, 3072};
constexpr BertSize kLarge{"bert-large", 24, 1024, 16, 4096};

absl::StatusOr<std::unique_ptr<Workload>> MakeBase(const ParamMap& p, const ComputeSpec& s) {
  return MakeBert(kBase, p, s);
}
absl::StatusOr<std::unique_ptr<Workload>> MakeLarge(const ParamMap& p, const ComputeSpec& s) {
  return MakeBert(kLarge, p, s);
}

}  // namespace

// Default batches: DeepUM's smallest (Table 5: BERT Base 29, Large 14).
UMLAB_REGISTER_WORKLOAD(bert_base, {"bert-base", "BERT base (110 M) masked-LM training",
                                    BertParams(29), MakeBase});
UMLAB_REGISTER_WORKLOAD(bert_large, {"bert-large", "BERT large (340 M) masked-LM training",
                                     BertParams(14), MakeLarge});

}  // namespace umlab
