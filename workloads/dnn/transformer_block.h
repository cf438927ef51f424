// The transformer encoder/decoder layer GPT-2, BERT and ViT share, written
// as HuggingFace (GPT-2, BERT) and timm (ViT) write it.
//
//   pre-LN (GPT-2, ViT):  x = x + drop(proj(attn(ln_1(x))))
//                         x = x + drop(fc2(gelu(fc1(ln_2(x)))))
//   post-LN (BERT):       x = ln_1(x + drop(dense(attn(x))))
//                         x = ln_2(x + drop(out(gelu(intermediate(x)))))
//
// GPT-2's c_attn and timm's qkv compute q, k and v with one fused
// Linear(C, 3C); BERT has three Linear(C, C). Attention is causal in GPT-2
// (the mask is fused into the softmax, so it costs no memory here).
#ifndef UMLAB_WORKLOADS_DNN_TRANSFORMER_BLOCK_H_
#define UMLAB_WORKLOADS_DNN_TRANSFORMER_BLOCK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/param_map.h"
#include "workloads/dnn/training_graph.h"
#include "workloads/workload.h"

namespace umlab {

struct TransformerShape {
  uint64_t batch = 0;
  uint64_t seq = 0;
  uint64_t hidden = 0;  // C
  uint64_t heads = 0;
  uint64_t ffn = 0;     // 4C in all three models
  bool pre_norm = true;
  bool fused_qkv = true;
  double dropout = 0;       // hidden-state dropout (resid / hidden_dropout_prob)
  double attn_dropout = 0;  // attention-probability dropout
  // GPT-2 (transformers 5): k and v copied into the DynamicCache, and
  // gelu_new composed of elementwise ops.
  bool kv_cache_copies = false;
  bool gelu_tanh_composed = false;
  // ViT (torchvision): MultiheadAttention(batch_first=True)'s layout copies
  // (layout_copies.cc) around a packed in_proj whose bias is added apart.
  bool torchvision_layout = false;
  bool packed_selects = false;  // and q, k, v selected from the packed projection
};

// Writes one iteration of a token-sequence model (GPT-2, BERT) whose
// samples hold `seq` tokens; returns the model's one-line summary.
using SequenceModelBuilder =
    std::function<absl::StatusOr<std::string>(TrainingGraph& graph, uint64_t seq)>;

// A token-sequence model's workload: reads the training options and the
// `seq` parameter (tokens per sample; its ParamRange caps it at the model's
// position table), then builds it through MakeDnnWorkload.
absl::StatusOr<std::unique_ptr<Workload>> MakeSequenceWorkload(
    const std::string& name, const ParamMap& params, const ComputeSpec& spec,
    const SequenceModelBuilder& build);

// RegisterModelFamily's `make` for a token-sequence family whose sizes
// build(size, graph, seq) writes: MakeSequenceWorkload under the size's name.
template <typename BuildFn>
auto SequenceFamily(BuildFn build) {
  return [build](const auto& size, const ParamMap& params, const ComputeSpec& spec) {
    return MakeSequenceWorkload(size.name, params, spec, [&](TrainingGraph& g, uint64_t seq) {
      return build(size, g, seq);
    });
  };
}

// The parameters a token-sequence model declares: TrainingParams (Adam by
// default) and `seq`, tokens per sample, by default and at most
// `max_tokens`, the rows of the model's position table.
std::vector<ParamInfo> SequenceParams(int default_batch, uint64_t max_tokens,
                                      const std::string& seq_description);

// The rows a batch's token-embedding lookup touches: `rows` ids drawn from a
// power law over the vocabulary (word frequencies are Zipfian, exponent
// about 1), seeded by the training options.
KernelAccess TokenRows(TrainingGraph& graph, uint64_t vocabulary, uint64_t hidden,
                       uint64_t rows);

// The rows a position-embedding lookup touches: positions 0..seq-1, the
// first `seq` rows of the table, the same for every sample.
KernelAccess PositionRows(const TrainingGraph& graph, uint64_t seq, uint64_t hidden);

// One layer named `prefix` (e.g. "h.3"): allocates its parameters and
// appends its forward ops. Consumes `x` [batch, seq, hidden]; returns the
// layer output.
int TransformerLayer(TrainingGraph& graph, const std::string& prefix,
                     const TransformerShape& shape, int x);

// `layers` layers named prefix0, prefix1, ... (e.g. "transformer.h.3"), one
// after the other. Consumes x; returns the last layer's output.
int TransformerLayers(TrainingGraph& graph, const std::string& prefix, int layers,
                      const TransformerShape& shape, int x);

// A language-model head whose decoder is tied to the token embedding `table`
// (its gradient accumulates into the table's), with its own `bias` (-1:
// none), and the cross-entropy loss against `labels`. Consumes x [rows,
// table.dim]; returns the loss.
int TiedLanguageModelLoss(TrainingGraph& graph, const std::string& decoder_name,
                          const EmbeddingLayer& table, int bias, int x, int labels,
                          uint64_t rows);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_TRANSFORMER_BLOCK_H_
