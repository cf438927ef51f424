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
#include <string>

#include "absl/status/statusor.h"
#include "core/param_map.h"
#include "workloads/dnn/training_graph.h"

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
};

// One layer named `prefix` (e.g. "h.3"): allocates its parameters and
// appends its forward ops. Consumes `x` [batch, seq, hidden]; returns the
// layer output.
int TransformerLayer(TrainingGraph& graph, const std::string& prefix,
                     const TransformerShape& shape, int x);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_TRANSFORMER_BLOCK_H_
