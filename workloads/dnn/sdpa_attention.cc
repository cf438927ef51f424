// Scaled dot-product attention as PyTorch 2.11 runs it for fp32 training on
// an sm80+ GPU: torch.nn.functional.scaled_dot_product_attention, which
// transformers 5 uses by default (attn_implementation="sdpa") and
// torchvision's MultiheadAttention calls with need_weights=False, picks the
// memory-efficient (cutlass) kernel, since flash attention has no fp32.
//
// The kernel never materialises the T x T scores: forward is one kernel
// that reads q, k and v and writes the output plus a per-row logsumexp
// (fp32, rows padded to 32); dropout is drawn from a Philox seed inside the
// kernel, so no mask is kept. Backward saves q, k, v, the output and the
// logsumexp, and runs four small kernels before the fused one, as the
// profiler shows: grad_out * out and its row sum (the softmax delta, fp32),
// a contiguous copy of grad_out, and zeroing grad_q, which the kernel
// accumulates into. GPT-2 (transformers 5) first copies k and v into its
// DynamicCache (two cat kernels) and attends over the copies.
#include <utility>

#include "absl/strings/str_cat.h"
#include "workloads/dnn/training_graph.h"

namespace umlab {
int TrainingGraph::SdpaAttention(const std::string& name, const AttentionShape& s, int q, int k,
                                 int v) {
  const bool fused = k < 0;
  const uint64_t bhtt = s.batch * s.heads * s.seq * s.seq;
  const uint64_t bhtd = s.batch * s.heads * s.seq * s.head_dim;
  const uint64_t lse_bytes = s.batch * s.heads * ((s.seq + 31) / 32 * 32) * 4;
  const std::string shape =
      absl::StrCat(s.batch, "x", s.heads, "x", s.seq, "x", s.seq, "x", s.head_dim);
  // q k^T and p v, plus the softmax and dropout on the fly.
  const double flops = 4.0 * D(bhtt) * D(s.head_dim) + 8.0 * D(bhtt);
  const int packed = fused ? q : -1;
  if (fused) k = v = q;
  int key = k, value = v;
  if (s.kv_cache_copies) {
    key = Activation(name + ".key_cache", bhtd, false);
    Kernel(name + ".key_cache_cat_" + shape, 0, false, {R(k), W(key)});
    value = Activation(name + ".value_cache", bhtd, false);
    Kernel(name + ".value_cache_cat_" + shape, 0, false, {R(v), W(value)});
  }
  const int out = Activation(name + ".context", bhtd);
  const int lse = Workspace(name + ".logsumexp", lse_bytes);
  Kernel(name + ".sdpa_fwd_" + shape, flops, half(), {R(q), R(key), R(value), W(out), W(lse)});

  TapeEntry entry{{out}, {}, nullptr};
  Save(entry, q);
  if (!fused) {
    Save(entry, k);
    Save(entry, v);
  }
  if (s.kv_cache_copies) {
    Save(entry, key);
    Save(entry, value);
  }
  Save(entry, out);
  Save(entry, lse);
  entry.backward = [=, this](const std::vector<int>& g) {
    const int product = Workspace(name + ".sdpa_delta_product", bhtd * element_);
    Kernel(name + ".sdpa_bwd_delta_mul_" + shape, D(bhtd), false,
           {R(g[0]), R(out), W(product)});
    const int delta = Workspace(name + ".sdpa_delta", lse_bytes);
    Kernel(name + ".sdpa_bwd_delta_sum_" + shape, D(bhtd), false, {R(product), W(delta)});
    Unref(product);
    const int g_out = Workspace(name + ".context.grad_contiguous", bhtd * element_);
    Kernel(name + ".sdpa_bwd_grad_out_copy_" + shape, 0, false, {R(g[0]), W(g_out)});
    const int g_q = NewTensor(name + ".q.grad", bhtd * element_, TensorRole::kGradient, false);
    Kernel(name + ".sdpa_bwd_zero_grad_q_" + shape, 0, false, {W(g_q)});
    const int g_k = NewTensor(name + ".k.grad", bhtd * element_, TensorRole::kGradient, false);
    const int g_v = NewTensor(name + ".v.grad", bhtd * element_, TensorRole::kGradient, false);
    // Recomputes the probabilities: twice the forward's products, plus the
    // three gradient products.
    Kernel(name + ".sdpa_bwd_" + shape, 2.5 * flops, half(),
           {R(q), R(key), R(value), R(out), R(g_out), R(lse), R(delta), R(g_q), W(g_q), W(g_k),
            W(g_v)});
    Unref(delta);
    Unref(g_out);
    if (fused && s.packed_selects) {
      // Each of q, k and v comes back through two transposes made
      // contiguous, then select_backward writes it into zeros of the packed
      // shape and the three are summed.
      int parts[3] = {g_q, g_k, g_v};
      for (int& part : parts) {
        for (int copy = 0; copy < 2; ++copy) {
          const int next = NewTensor(Name(part) + ".contiguous", bhtd * element_,
                                     TensorRole::kGradient, false);
          Kernel(absl::StrCat(Name(part), ".transpose_bwd_copy", copy, "_", shape), 0, false,
                 {R(part), W(next)});
          Unref(part);
          part = next;
        }
      }
      int g_qkv = -1;
      for (int i = 0; i < 3; ++i) {
        const int scattered = Grad(packed, Bytes(packed));
        Kernel(absl::StrCat(name, ".select_bwd", i, "_", shape), 0, false,
               {R(parts[i]), W(scattered)});
        Unref(parts[i]);
        if (g_qkv < 0) {
          g_qkv = scattered;
          continue;
        }
        const int sum = Grad(packed, Bytes(packed));
        Kernel(absl::StrCat(name, ".select_bwd_sum", i, "_", shape), D(Bytes(packed) / element_),
               false, {R(g_qkv), R(scattered), W(sum)});
        Unref(g_qkv);
        Unref(scattered);
        g_qkv = sum;
      }
      AddGrad(packed, g_qkv);
    } else {
      AttentionInputGrads(name + ".qkv_split_bwd_" + shape, packed, q, k, v, g_q, g_k, g_v);
    }
  };
  Record(std::move(entry));
  if (s.kv_cache_copies) {
    Unref(key);
    Unref(value);
  }
  Unref(lse);
  Unref(q);
  if (!fused) {
    Unref(k);
    Unref(v);
  }
  return out;
}

}  // namespace umlab
