#include "workloads/dnn/transformer_block.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/dnn_workload.h"

namespace umlab {
namespace {

// Word frequencies are Zipfian (exponent about 1).
constexpr double kTokenZipfExponent = 1.0;

}  // namespace

int TransformerLayer(TrainingGraph& g, const std::string& prefix, const TransformerShape& s,
                     int x) {
  const uint64_t rows = s.batch * s.seq;
  const uint64_t c = s.hidden;
  const uint64_t elements = rows * c;
  const TrainingGraph::AttentionShape attention{s.batch, s.heads, s.seq, c / s.heads,
                                                s.attn_dropout, s.kv_cache_copies,
                                                s.packed_selects};

  // Self-attention with its residual.
  const NormLayer ln_1 = g.MakeLayerNorm(prefix + ".ln_1", c);
  g.Retain(x);  // the residual
  int h = s.pre_norm ? g.LayerNorm(ln_1, x, rows) : x;
  if (!s.pre_norm) g.Retain(x);  // post-LN: q, k and v all read x
  int a;
  if (s.torchvision_layout) {
    LinearLayer in_proj = g.MakeLinear(prefix + ".attn.c_attn", c, 3 * c, true);
    const int bias = in_proj.bias;
    in_proj.bias = -1;  // added apart: the GEMM ran on a folded copy
    int qkv = g.Linear(in_proj, g.Contiguous(h, prefix + ".attn.in_proj_input"), rows);
    qkv = g.AddBiasInPlace(qkv, bias, prefix + ".attn.in_proj");
    qkv = g.Contiguous(qkv, prefix + ".attn.qkv");
    a = g.Contiguous(g.Attention(prefix + ".attn", attention, qkv, -1, -1),
                     prefix + ".attn.out_permute");
  } else if (s.fused_qkv) {
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
  if (s.torchvision_layout) x = g.Contiguous(x, prefix + ".attn.residual");
  if (!s.pre_norm) x = g.LayerNorm(ln_1, x, rows);

  // Feed-forward with its residual.
  const NormLayer ln_2 = g.MakeLayerNorm(prefix + ".ln_2", c);
  g.Retain(x);
  h = s.pre_norm ? g.LayerNorm(ln_2, x, rows) : x;
  const LinearLayer fc = g.MakeLinear(prefix + ".mlp.c_fc", c, s.ffn, true);
  const LinearLayer fc_proj = g.MakeLinear(prefix + ".mlp.c_proj", s.ffn, c, true);
  h = g.Linear(fc, h, rows);
  h = s.gelu_tanh_composed ? g.GeluTanhComposed(h, prefix + ".mlp.act", rows * s.ffn)
                           : g.Gelu(h, prefix + ".mlp.act", rows * s.ffn);
  h = g.Dropout(g.Linear(fc_proj, h, rows), prefix + ".mlp.dropout", elements, s.dropout);
  x = g.Add(x, h, prefix + ".mlp.residual", elements);
  if (s.torchvision_layout) x = g.Contiguous(x, prefix + ".mlp.residual");
  if (!s.pre_norm) x = g.LayerNorm(ln_2, x, rows);
  return x;
}

int TransformerLayers(TrainingGraph& g, const std::string& prefix, int layers,
                      const TransformerShape& shape, int x) {
  for (int l = 0; l < layers; ++l) x = TransformerLayer(g, absl::StrCat(prefix, l), shape, x);
  return x;
}

int TiedLanguageModelLoss(TrainingGraph& g, const std::string& decoder_name,
                          const EmbeddingLayer& table, int bias, int x, int labels,
                          uint64_t rows) {
  const LinearLayer decoder{decoder_name, table.dim, table.rows, table.weight, bias};
  const int logits = g.Linear(decoder, x, rows);
  return g.CrossEntropy(logits, labels, "loss", rows, table.rows);
}

KernelAccess TokenRows(TrainingGraph& g, uint64_t vocabulary, uint64_t hidden, uint64_t rows) {
  KernelAccess access;
  access.gather = g.builder().Gather(GatherSpec{GatherKind::kPowerLaw, vocabulary,
                                                hidden * g.element_bytes(), rows,
                                                kTokenZipfExponent, g.options().seed});
  return access;
}

KernelAccess PositionRows(const TrainingGraph& g, uint64_t seq, uint64_t hidden) {
  KernelAccess access;
  access.size = seq * hidden * g.element_bytes();
  return access;
}

std::vector<ParamInfo> SequenceParams(int default_batch, uint64_t max_tokens,
                                      const std::string& seq_description) {
  std::vector<ParamInfo> params = TrainingParams(default_batch, 3, Optimizer::kAdam);
  params.push_back(AttentionParamInfo());
  params.push_back({"seq", ParamType::kInt, absl::StrCat(max_tokens), seq_description,
                    ParamRange::Closed(1, max_tokens)});
  return params;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeSequenceWorkload(
    const std::string& name, const ParamMap& params, const ComputeSpec& spec,
    const SequenceModelBuilder& build) {
  const TrainingOptions options = TrainingOptionsFromParams(params, /*attention=*/true);
  const uint64_t seq = static_cast<uint64_t>(params.Int("seq"));
  return MakeDnnWorkload(name, options, spec, [&](TrainingGraph& g) { return build(g, seq); });
}

}  // namespace umlab
