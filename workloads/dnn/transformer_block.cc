#include "workloads/dnn/transformer_block.h"

#include "absl/strings/str_format.h"

namespace umlab {

int TransformerLayer(TrainingGraph& g, const std::string& prefix, const TransformerShape& s,
                     int x) {
  const uint64_t rows = s.batch * s.seq;
  const uint64_t c = s.hidden;
  const uint64_t elements = rows * c;
  const TrainingGraph::AttentionShape attention{s.batch, s.heads, s.seq, c / s.heads,
                                                s.attn_dropout};

  // Self-attention with its residual.
  const NormLayer ln_1 = g.MakeLayerNorm(prefix + ".ln_1", c);
  g.Retain(x);  // the residual
  int h = s.pre_norm ? g.LayerNorm(ln_1, x, rows) : x;
  if (!s.pre_norm) g.Retain(x);  // post-LN: q, k and v all read x
  int a;
  if (s.fused_qkv) {
    const LinearLayer qkv = g.MakeLinear(prefix + ".attn.c_attn", c, 3 * c, true);
    a = g.Attention(prefix + ".attn", attention, g.Linear(qkv, h, rows), -1, -1);
  } else {
    const LinearLayer query = g.MakeLinear(prefix + ".attention.self.query", c, c, true);
    const LinearLayer key = g.MakeLinear(prefix + ".attention.self.key", c, c, true);
    const LinearLayer value = g.MakeLinear(prefix + ".attention.self.value", c, c, true);
    g.Retain(h);
    g.Retain(h);
    const int q = g.Linear(query, h, rows);
    const int k = g.Linear(key, h, rows);
    const int v = g.Linear(value, h, rows);
    a = g.Attention(prefix + ".attention.self", attention, q, k, v);
  }
  if (!s.pre_norm) g.Drop(x);  // the extra handle taken for q, k and v
  const LinearLayer proj = g.MakeLinear(prefix + ".attn.c_proj", c, c, true);
  a = g.Dropout(g.Linear(proj, a, rows), prefix + ".attn.resid_dropout", elements, s.dropout);
  x = g.Add(x, a, prefix + ".attn.residual", elements);
  if (!s.pre_norm) x = g.LayerNorm(ln_1, x, rows);

  // Feed-forward with its residual.
  const NormLayer ln_2 = g.MakeLayerNorm(prefix + ".ln_2", c);
  g.Retain(x);
  h = s.pre_norm ? g.LayerNorm(ln_2, x, rows) : x;
  const LinearLayer fc = g.MakeLinear(prefix + ".mlp.c_fc", c, s.ffn, true);
  const LinearLayer fc_proj = g.MakeLinear(prefix + ".mlp.c_proj", s.ffn, c, true);
  h = g.Gelu(g.Linear(fc, h, rows), prefix + ".mlp.act", rows * s.ffn);
  h = g.Dropout(g.Linear(fc_proj, h, rows), prefix + ".mlp.dropout", elements, s.dropout);
  x = g.Add(x, h, prefix + ".mlp.residual", elements);
  if (!s.pre_norm) x = g.LayerNorm(ln_2, x, rows);
  return x;
}

}  // namespace umlab
