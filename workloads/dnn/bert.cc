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
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/transformer_block.h"

namespace umlab {
namespace {

struct BertSize {
  const char* name;
  const char* description;
  int default_batch;
  int layers, hidden, heads, intermediate;
};

constexpr uint64_t kVocabulary = 30522;
constexpr uint64_t kPositions = 512;
constexpr uint64_t kTokenTypes = 2;
constexpr double kDropout = 0.1;

// Default batches: DeepUM's smallest (Table 5: BERT Base 29, Large 14).
constexpr BertSize kSizes[] = {
    {"bert-base", "BERT base (110 M) masked-LM training", 29, 12, 768, 12, 3072},
    {"bert-large", "BERT large (340 M) masked-LM training", 14, 24, 1024, 16, 4096},
};

std::vector<ParamInfo> BertParams(const BertSize& size) {
  return SequenceParams(size.default_batch, kPositions, "tokens per sample (at most 512)");
}

absl::StatusOr<std::string> BuildBert(const BertSize& size, TrainingGraph& g, uint64_t t) {
  const uint64_t b = g.options().batch;
  const uint64_t c = size.hidden;
  const uint64_t rows = b * t;
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
  const KernelAccess word_rows = TokenRows(g, kVocabulary, c, rows);
  KernelAccess all_rows;  // both token-type rows
  int x = g.Embedding(words, ids, rows, word_rows);
  x = g.Add(x, g.Embedding(types, type_ids, rows, all_rows), "bert.embeddings.add_types",
            rows * c);
  x = g.Add(x, g.Embedding(positions, ids, rows, PositionRows(g, t, c)),
            "bert.embeddings.add_positions", rows * c);
  x = g.LayerNorm(embed_norm, x, rows);
  x = g.Dropout(x, "bert.embeddings.dropout", rows * c, kDropout);

  TransformerShape shape{b, t, c, static_cast<uint64_t>(size.heads),
                         static_cast<uint64_t>(size.intermediate),
                         /*pre_norm=*/false, /*fused_qkv=*/false, kDropout, kDropout};
  x = TransformerLayers(g, "bert.encoder.layer.", size.layers, shape, x);
  // MLM head: transform, then the decoder tied to the word embeddings.
  const LinearLayer transform = g.MakeLinear("cls.predictions.transform.dense", c, c, true);
  const NormLayer transform_norm = g.MakeLayerNorm("cls.predictions.transform.LayerNorm", c);
  const int decoder_bias = g.MakeParameter("cls.predictions.bias", kVocabulary);
  x = g.Gelu(g.Linear(transform, x, rows), "cls.predictions.transform.act", rows * c);
  x = g.LayerNorm(transform_norm, x, rows);
  const int loss =
      TiedLanguageModelLoss(g, "cls.predictions.decoder", words, decoder_bias, x, labels, rows);
  g.Backward(loss);
  g.Step();
  return absl::StrFormat(
      "BERT %s masked-LM training: %d layers, hidden %d, %d heads, intermediate %d, "
      "vocabulary %d, %d tokens per sample, dropout 0.1",
      size.name + 5, size.layers, size.hidden, size.heads, size.intermediate, kVocabulary,
      t);
}

}  // namespace

UMLAB_REGISTER_MODEL_FAMILY(bert, kSizes, BertParams, SequenceFamily(BuildBert));

}  // namespace umlab
