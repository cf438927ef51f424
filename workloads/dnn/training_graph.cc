#include "workloads/dnn/training_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab {

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

const char* OptimizerName(Optimizer optimizer) {
  return optimizer == Optimizer::kAdam ? "adam" : "sgd";
}

uint64_t ElementBytes(Precision precision) { return precision == Precision::kFp32 ? 4 : 2; }

std::vector<std::string> PrecisionChoices() {
  return {PrecisionName(Precision::kFp32), PrecisionName(Precision::kFp16),
          PrecisionName(Precision::kBf16)};
}

std::vector<std::string> OptimizerChoices() {
  return {OptimizerName(Optimizer::kSgd), OptimizerName(Optimizer::kAdam)};
}

Precision PrecisionParam(const ParamMap& params) {
  return static_cast<Precision>(params.Choice("precision"));
}

Optimizer OptimizerParam(const ParamMap& params) {
  return static_cast<Optimizer>(params.Choice("optimizer"));
}

std::vector<ParamInfo> TrainingParams(int default_batch, int default_iterations,
                                      Optimizer default_optimizer) {
  return {
      {"batch", ParamType::kInt, absl::StrCat(default_batch), "samples per batch",
       ParamRange::Closed(1, 1 << 24)},
      {"iterations", ParamType::kInt, absl::StrCat(default_iterations),
       "training iterations", ParamRange::Closed(1, 1'000'000)},
      {"precision", ParamType::kString, "fp32",
       "element type of every floating-point tensor: fp32, fp16 or bf16 (model.half(): "
       "no fp32 master copy; half types run matrix products at the tensor-core peak)",
       {},
       PrecisionChoices()},
      {"optimizer", ParamType::kString, OptimizerName(default_optimizer),
       "sgd (momentum_buffer) or adam (exp_avg, exp_avg_sq)", {}, OptimizerChoices()},
      {"foreach", ParamType::kBool, "true",
       "the optimizer's foreach kernels, PyTorch's default on CUDA (multi_tensor_apply: a few "
       "launches per step); false: one loop over the parameters, 7 kernels each for adam, 3 for "
       "sgd"},
      {"offload", ParamType::kBool, "false",
       "ZeRO-Offload: the optimizer step runs on the CPU, one host kernel per parameter "
       "(CPU-Adam or CPU-SGD over fp32 master weights and state in pinned host memory, at the "
       "device's cpu_gbps); the GPU keeps parameters and gradients only"},
      {"seed", ParamType::kInt, "1", "seed of the irregular accesses (embedding rows)"},
  };
}

ParamInfo AttentionParamInfo() {
  return {"attention", ParamType::kString, "sdpa",
          "sdpa (PyTorch 2's memory-efficient scaled_dot_product_attention, the default of "
          "transformers 5 and torchvision) or eager (softmax(q k^T) v, keeping the T x T "
          "probabilities)",
          {},
          {"sdpa", "eager"}};
}

TrainingOptions TrainingOptionsFromParams(const ParamMap& params, bool attention) {
  TrainingOptions options;
  // TrainingParams' ranges keep both within int.
  options.batch = static_cast<int>(params.Int("batch"));
  options.iterations = static_cast<int>(params.Int("iterations"));
  options.precision = PrecisionParam(params);
  options.optimizer = OptimizerParam(params);
  options.foreach = params.Bool("foreach");
  options.offload = params.Bool("offload");
  if (attention) options.attention = static_cast<AttentionImpl>(params.Choice("attention"));
  options.seed = static_cast<uint64_t>(params.Int("seed"));
  return options;
}

std::string FormatParameterCount(uint64_t parameters) {
  const double count = static_cast<double>(parameters);
  if (parameters >= 1'000'000'000) return absl::StrFormat("%.3f B", count / 1e9);
  return absl::StrFormat("%.1f M", count / 1e6);
}

TrainingGraph::TrainingGraph(TensorProgram& program, const ComputeSpec& spec,
                             const TrainingOptions& options)
    : program_(program),
      build_(program, spec),
      options_(options),
      element_(ElementBytes(options.precision)) {
  program_.iterations = options.iterations;
  build_.IntoIteration();
}

// ---------------------------------------------------------------------------
// Tensors and references.
// ---------------------------------------------------------------------------

int TrainingGraph::NewTensor(const std::string& name, uint64_t bytes, TensorRole role,
                             bool requires_grad) {
  const int tensor = build_.Tensor(name, bytes, role);
  handles_.resize(program_.tensors.size());
  grad_.resize(program_.tensors.size(), -1);
  handles_[tensor].refs = 1;
  handles_[tensor].requires_grad = requires_grad;
  build_.Allocate(tensor);
  return tensor;
}

int TrainingGraph::Activation(const std::string& name, uint64_t elements,
                              bool requires_grad) {
  return NewTensor(name, elements * element_, TensorRole::kActivation, requires_grad);
}

int TrainingGraph::Workspace(const std::string& name, uint64_t bytes) {
  return NewTensor(name, bytes, TensorRole::kWorkspace, false);
}

int TrainingGraph::Grad(int of, uint64_t bytes) {
  return NewTensor(Name(of) + ".grad", bytes, TensorRole::kGradient, false);
}

void TrainingGraph::Retain(int tensor) { ++handles_[tensor].refs; }
void TrainingGraph::Drop(int tensor) { Unref(tensor); }

void TrainingGraph::Unref(int tensor) {
  Handle& handle = handles_[tensor];
  if (handle.parameter || handle.input) return;
  if (--handle.refs == 0) build_.Release(tensor);
}

void TrainingGraph::Save(TapeEntry& entry, int tensor) {
  ++handles_[tensor].refs;
  entry.saved.push_back(tensor);
}

void TrainingGraph::Record(TapeEntry entry) { tape_.push_back(std::move(entry)); }

void TrainingGraph::Kernel(const std::string& name, double flops, bool tensor_cores,
                           std::vector<KernelAccess> accesses, double bytes) {
  build_.Launch(name, flops, tensor_cores, std::move(accesses), bytes);
}

void TrainingGraph::AddGrad(int tensor, int grad) {
  // By index, not by reference: the sum below allocates, which may grow
  // handles_ and grad_.
  if (!handles_[tensor].requires_grad) return Unref(grad);
  const int current = grad_[tensor];
  if (current < 0) {
    grad_[tensor] = grad;  // autograd hands the first gradient over without a copy
    return;
  }
  const uint64_t elements = Bytes(tensor) / element_;
  // Each sum is its own launch site (its own execution id).
  const std::string sum_index = absl::StrCat(grad_sums_[tensor]++);
  if (handles_[tensor].parameter) {
    // AccumulateGrad: param.grad += new_grad, in place.
    Kernel(Name(tensor) + ".grad_accumulate_" + sum_index, D(elements), false,
           {R(current), R(grad), W(current)});
    return Unref(grad);
  }
  // InputBuffer::accumulate: a new tensor holding the sum.
  const int sum = Grad(tensor, Bytes(current));
  Kernel(Name(tensor) + ".grad_sum_" + sum_index, D(elements), false,
         {R(current), R(grad), W(sum)});
  Unref(current);
  Unref(grad);
  grad_[tensor] = sum;
}

// ---------------------------------------------------------------------------
// Parameters.
// ---------------------------------------------------------------------------

int TrainingGraph::AddParameter(const std::string& name, uint64_t elements, bool trainable) {
  build_.IntoSetup();
  const int tensor = build_.Tensor(name, elements * element_, TensorRole::kParameter);
  handles_.resize(program_.tensors.size());
  grad_.resize(program_.tensors.size(), -1);
  handles_[tensor].refs = 1;
  handles_[tensor].parameter = true;
  handles_[tensor].requires_grad = trainable;
  build_.Allocate(tensor);
  Kernel("init_" + name, 0, false, {W(tensor)});
  build_.IntoIteration();
  if (trainable) {
    parameters_.push_back(ParameterInfo{tensor, name, elements, false, {}, {}});
    trainable_elements_ += elements;
  }
  return tensor;
}

int TrainingGraph::MakeParameter(const std::string& name, uint64_t elements) {
  return AddParameter(name, elements, true);
}

LinearLayer TrainingGraph::MakeLinear(const std::string& name, uint64_t in, uint64_t out,
                                      bool bias) {
  LinearLayer layer{name, in, out};
  layer.weight = AddParameter(name + ".weight", in * out, true);
  if (bias) layer.bias = AddParameter(name + ".bias", out, true);
  return layer;
}

NormLayer TrainingGraph::MakeLayerNorm(const std::string& name, uint64_t channels) {
  NormLayer layer{name, channels};
  layer.weight = AddParameter(name + ".weight", channels, true);
  layer.bias = AddParameter(name + ".bias", channels, true);
  return layer;
}

NormLayer TrainingGraph::MakeBatchNorm(const std::string& name, uint64_t channels) {
  NormLayer layer = MakeLayerNorm(name, channels);
  // Buffers, not parameters: updated by the forward pass, no gradient.
  layer.running_mean = AddParameter(name + ".running_mean", channels, false);
  layer.running_var = AddParameter(name + ".running_var", channels, false);
  // An int64 counter, bumped every training forward.
  layer.num_batches_tracked = AddParameter(name + ".num_batches_tracked", 8 / element_, false);
  return layer;
}

ConvLayer TrainingGraph::MakeConv(const std::string& name, uint64_t in, uint64_t out,
                                  uint64_t kernel, uint64_t stride, uint64_t padding,
                                  uint64_t groups, bool bias) {
  ConvLayer layer{name, in, out, kernel, stride, padding, groups};
  layer.weight = AddParameter(name + ".weight", out * (in / groups) * kernel * kernel, true);
  if (bias) layer.bias = AddParameter(name + ".bias", out, true);
  return layer;
}

EmbeddingLayer TrainingGraph::MakeEmbedding(const std::string& name, uint64_t rows,
                                            uint64_t dim) {
  EmbeddingLayer layer{name, rows, dim};
  layer.weight = AddParameter(name + ".weight", rows * dim, true);
  return layer;
}

void TrainingGraph::MarkSparse(const EmbeddingLayer& layer, KernelAccess rows) {
  for (ParameterInfo& p : parameters_) {
    if (p.tensor == layer.weight) {
      p.sparse = true;
      p.sparse_rows = rows;
    }
  }
}

// ---------------------------------------------------------------------------
// Iteration structure.
// ---------------------------------------------------------------------------

void TrainingGraph::BeginIteration() {
  build_.IntoIteration();
  build_.IterationBegin();
  first_iteration_tensor_ = static_cast<int>(program_.tensors.size());
}

int TrainingGraph::LoadInput(const std::string& name, uint64_t bytes) {
  const int tensor = NewTensor(name, bytes, TensorRole::kData, false);
  handles_[tensor].input = true;
  Kernel("load_" + name, 0, false, {W(tensor)});
  inputs_.push_back(tensor);
  return tensor;
}

void TrainingGraph::Backward(int loss) {
  const int seed = Grad(loss, Bytes(loss));
  Kernel(Name(loss) + ".backward_seed", 0, false, {W(seed)});
  grad_[loss] = seed;
  for (auto entry = tape_.rbegin(); entry != tape_.rend(); ++entry) {
    std::vector<int> grads;
    bool any = false;
    for (int output : entry->outputs) {
      grads.push_back(grad_[output]);
      any = any || grad_[output] >= 0;
      grad_[output] = -1;
    }
    if (any) entry->backward(grads);
    for (int g : grads) {
      if (g >= 0) Unref(g);
    }
    for (int saved : entry->saved) Unref(saved);
  }
  tape_.clear();
  Unref(loss);
}

absl::Status TrainingGraph::Finish() {
  for (int input : inputs_) {
    handles_[input].refs = 0;
    build_.Release(input);
  }
  inputs_.clear();
  for (int t = first_iteration_tensor_; t < static_cast<int>(handles_.size()); ++t) {
    if (handles_[t].parameter) continue;
    if (handles_[t].refs != 0) {
      return absl::InternalError(absl::StrFormat(
          "%s: tensor %s is still referenced (%d) at the end of the iteration: the "
          "generator leaks it",
          program_.workload, Name(t), handles_[t].refs));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Forward ops and their backward.
// ---------------------------------------------------------------------------

void TrainingGraph::WeightedForward(const std::string& kernel, double flops, int x, int weight,
                                    int bias, int y, uint64_t rows) {
  std::vector<KernelAccess> accesses = {R(x), GemmWeightRead(weight, rows)};
  if (bias >= 0) accesses.push_back(R(bias));
  accesses.push_back(W(y));
  Kernel(kernel, flops, half(), std::move(accesses));
}

void TrainingGraph::WeightedBackward(const std::string& prefix, const std::string& shape,
                                     double flops, int x, int weight, int gy, uint64_t rows) {
  if (RequiresGrad(x)) {
    const int gx = Grad(x, Bytes(x));
    Kernel(prefix + "_dgrad_" + shape, flops, half(),
           {R(gy), GemmWeightRead(weight, rows), W(gx)});
    AddGrad(x, gx);
  }
  const int gw = Grad(weight, Bytes(weight));
  Kernel(prefix + "_wgrad_" + shape, flops, half(), {R(gy), R(x), W(gw)});
  AddGrad(weight, gw);
}

void TrainingGraph::BiasBackward(const std::string& kernel, double flops, int bias, int gy) {
  const int gb = Grad(bias, Bytes(bias));
  Kernel(kernel, flops, false, {R(gy), W(gb)});
  AddGrad(bias, gb);
}

int TrainingGraph::Linear(const LinearLayer& layer, int x, uint64_t rows) {
  const int y = Activation(layer.name + ".out", rows * layer.out);
  const double flops = 2.0 * D(rows) * D(layer.in) * D(layer.out);
  const std::string shape = absl::StrCat(rows, "x", layer.out, "x", layer.in);
  WeightedForward(layer.name + ".gemm_fwd_" + shape, flops, x, layer.weight, layer.bias, y,
                  rows);
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, x);
  entry.backward = [this, layer, x, rows, flops, shape](const std::vector<int>& g) {
    const int gy = g[0];
    // AddmmBackward: bias, then input, then weight gradient.
    if (layer.bias >= 0) {
      BiasBackward(layer.name + ".bias_grad_" + shape, D(rows * layer.out), layer.bias, gy);
    }
    WeightedBackward(layer.name + ".gemm", shape, flops, x, layer.weight, gy, rows);
  };
  Record(std::move(entry));
  Unref(x);
  return y;
}

int TrainingGraph::LayerNorm(const NormLayer& layer, int x, uint64_t rows) {
  const uint64_t elements = rows * layer.channels;
  const int y = Activation(layer.name + ".out", elements);
  // Mean and reciprocal std per row, kept in fp32 (the accumulate type).
  const int mean = Workspace(layer.name + ".mean", rows * 4);
  const int rstd = Workspace(layer.name + ".rstd", rows * 4);
  const std::string shape = absl::StrCat(rows, "x", layer.channels);
  Kernel(layer.name + ".layer_norm_fwd_" + shape, 8.0 * D(elements), false,
         {R(x), R(layer.weight), R(layer.bias), W(y), W(mean), W(rstd)});
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, x);
  Save(entry, mean);
  Save(entry, rstd);
  entry.backward = [this, layer, x, mean, rstd, elements, shape](const std::vector<int>& g) {
    const int gy = g[0];
    if (RequiresGrad(x)) {
      const int gx = Grad(x, Bytes(x));
      Kernel(layer.name + ".layer_norm_bwd_input_" + shape, 10.0 * D(elements), false,
             {R(gy), R(x), R(mean), R(rstd), R(layer.weight), W(gx)});
      AddGrad(x, gx);
    }
    const int gw = Grad(layer.weight, Bytes(layer.weight));
    const int gb = Grad(layer.bias, Bytes(layer.bias));
    Kernel(layer.name + ".layer_norm_bwd_params_" + shape, 4.0 * D(elements), false,
           {R(gy), R(x), R(mean), R(rstd), W(gw), W(gb)});
    AddGrad(layer.weight, gw);
    AddGrad(layer.bias, gb);
  };
  Record(std::move(entry));
  Unref(mean);
  Unref(rstd);
  Unref(x);
  return y;
}

int TrainingGraph::Unary(int x, const std::string& name, const std::string& fn,
                         uint64_t elements, double forward_flops, double backward_flops) {
  const int y = Activation(name + ".out", elements);
  const std::string size = absl::StrCat(elements);
  Kernel(absl::StrCat(name, ".", fn, "_fwd_", size), forward_flops * D(elements), false,
         {R(x), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  // GELU's and hardtanh's backward read the input; tanh's reads its result.
  const int saved = fn == "tanh" ? y : x;
  Save(entry, saved);
  entry.backward = SavedTensorBackward(x, saved, absl::StrCat(name, ".", fn, "_bwd_", size),
                                       backward_flops * D(elements));
  Record(std::move(entry));
  Unref(x);
  return y;
}

std::function<void(const std::vector<int>&)> TrainingGraph::SavedTensorBackward(
    int x, int saved, std::string kernel, double flops) {
  return [this, x, saved, kernel = std::move(kernel), flops](const std::vector<int>& g) {
    const int gx = Grad(x, Bytes(x));
    Kernel(kernel, flops, false, {R(g[0]), R(saved), W(gx)});
    AddGrad(x, gx);
  };
}

int TrainingGraph::Gelu(int x, const std::string& name, uint64_t elements) {
  return Unary(x, name, "gelu", elements, 8.0, 12.0);
}

int TrainingGraph::Tanh(int x, const std::string& name, uint64_t elements) {
  return Unary(x, name, "tanh", elements, 4.0, 3.0);
}

int TrainingGraph::ClassTokenAndPosition(int x, int cls, int pos, const std::string& name,
                                         uint64_t batch, uint64_t tokens, uint64_t dim) {
  const uint64_t elements = batch * (tokens + 1) * dim;
  const std::string shape = absl::StrCat(batch, "x", tokens + 1, "x", dim);
  const int y = Activation(name + ".out", elements);
  Kernel(name + ".cls_cat_pos_add_" + shape, D(elements), false,
         {R(x), R(cls), R(pos), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  entry.backward = [this, x, cls, pos, name, shape, elements](const std::vector<int>& g) {
    const int gx = Grad(x, Bytes(x));
    Kernel(name + ".cls_cat_bwd_" + shape, 0, false, {R(g[0]), W(gx)});
    AddGrad(x, gx);
    // Broadcast parameters: their gradients are sums over the batch.
    const int gcls = Grad(cls, Bytes(cls));
    const int gpos = Grad(pos, Bytes(pos));
    Kernel(name + ".broadcast_param_grad_" + shape, D(elements), false,
           {R(g[0]), W(gcls), W(gpos)});
    AddGrad(cls, gcls);
    AddGrad(pos, gpos);
  };
  Record(std::move(entry));
  Unref(x);
  return y;
}

int TrainingGraph::Relu(int x, const std::string& name, uint64_t elements, bool inplace) {
  const std::string size = absl::StrCat(elements);
  int y = x;
  if (inplace) {
    Kernel(name + ".relu_inplace_" + size, D(elements), false, {R(x), W(x)});
  } else {
    y = Activation(name + ".out", elements);
    Kernel(name + ".relu_fwd_" + size, D(elements), false, {R(x), W(y)});
  }
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, y);  // threshold_backward reads the result
  entry.backward = SavedTensorBackward(x, y, name + ".relu_bwd_" + size, D(elements));
  Record(std::move(entry));
  if (!inplace) Unref(x);
  return y;
}

int TrainingGraph::Relu6(int x, const std::string& name, uint64_t elements) {
  return Unary(x, name, "hardtanh", elements, 2.0, 2.0);
}

int TrainingGraph::Dropout(int x, const std::string& name, uint64_t elements, double p) {
  if (p <= 0) return x;  // nn.Dropout(0) launches nothing in eval-free code paths
  const int y = Activation(name + ".out", elements);
  const int mask = Workspace(name + ".mask", elements);  // bool, one byte each
  const std::string size = absl::StrCat(elements);
  Kernel(name + ".dropout_fwd_" + size, 3.0 * D(elements), false, {R(x), W(mask), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, mask);
  entry.backward = SavedTensorBackward(x, mask, name + ".dropout_bwd_" + size, 2.0 * D(elements));
  Record(std::move(entry));
  Unref(mask);
  Unref(x);
  return y;
}

int TrainingGraph::Add(int a, int b, const std::string& name, uint64_t elements) {
  const int c = Activation(name + ".out", elements);
  Kernel(name + ".add_" + absl::StrCat(elements), D(elements), false, {R(a), R(b), W(c)});
  RecordSum(c, a, b);
  Unref(a);
  Unref(b);
  return c;
}

int TrainingGraph::AddInPlace(int a, int b, const std::string& name, uint64_t elements) {
  Kernel(name + ".add_inplace_" + absl::StrCat(elements), D(elements), false,
         {R(a), R(b), W(a)});
  RecordSum(a, a, b);
  Unref(b);
  return a;
}

void TrainingGraph::RecordSum(int output, int a, int b) {
  TapeEntry entry{{output}, {}, nullptr};
  entry.backward = [this, a, b](const std::vector<int>& g) {
    for (int input : {a, b}) {
      ++handles_[g[0]].refs;
      AddGrad(input, g[0]);
    }
  };
  Record(std::move(entry));
}

int TrainingGraph::Embedding(const EmbeddingLayer& layer, int ids, uint64_t count,
                             KernelAccess rows) {
  rows.tensor = layer.weight;
  rows.access = AccessType::kRead;
  const int y = Activation(layer.name + ".out", count * layer.dim);
  const std::string shape = absl::StrCat(count, "x", layer.dim);
  Kernel(layer.name + ".embedding_fwd_" + shape, 0, false, {R(ids), rows, W(y)});
  bool sparse = false;
  for (const ParameterInfo& p : parameters_) {
    if (p.tensor == layer.weight) sparse = p.sparse;
  }
  TapeEntry entry{{y}, {}, nullptr};
  entry.backward = [this, layer, ids, count, shape, sparse](const std::vector<int>& g) {
    if (sparse) {
      // A sparse COO gradient: one value row per lookup.
      const int gw = NewTensor(Name(layer.weight) + ".grad", count * layer.dim * element_,
                               TensorRole::kGradient, false);
      Kernel(layer.name + ".embedding_bwd_sparse_" + shape, 0, false,
             {R(g[0]), R(ids), W(gw)});
      AddGrad(layer.weight, gw);
      return;
    }
    AddGrad(layer.weight, EmbeddingDenseBackward(layer, ids, count, g[0]));
  };
  Record(std::move(entry));
  return y;
}

int TrainingGraph::Attention(const std::string& name, const AttentionShape& shape, int q, int k,
                             int v) {
  return options_.attention == AttentionImpl::kSdpa ? SdpaAttention(name, shape, q, k, v)
                                                    : EagerAttention(name, shape, q, k, v);
}

void TrainingGraph::AttentionInputGrads(const std::string& split_kernel, int packed, int q,
                                        int k, int v, int g_q, int g_k, int g_v) {
  if (packed < 0) {
    AddGrad(q, g_q);
    AddGrad(k, g_k);
    AddGrad(v, g_v);
    return;
  }
  // SplitBackward: the three view gradients concatenated into one.
  const int g_qkv = Grad(packed, Bytes(packed));
  Kernel(split_kernel, 0, false, {R(g_q), R(g_k), R(g_v), W(g_qkv)});
  Unref(g_q);
  Unref(g_k);
  Unref(g_v);
  AddGrad(packed, g_qkv);
}

int TrainingGraph::EagerAttention(const std::string& name, const AttentionShape& s, int q, int k,
                                  int v) {
  const bool fused = k < 0;
  if (fused) k = v = q;
  const uint64_t bhtt = s.batch * s.heads * s.seq * s.seq;
  const uint64_t bhtd = s.batch * s.heads * s.seq * s.head_dim;
  const double bmm_flops = 2.0 * D(bhtt) * D(s.head_dim);
  const std::string shape =
      absl::StrCat(s.batch, "x", s.heads, "x", s.seq, "x", s.seq, "x", s.head_dim);
  // The q, k and v views of a fused tensor are a third of it each.
  const double view_bytes = D(bhtd * element_);

  const int scores = Activation(name + ".scores", bhtt);
  Kernel(name + ".qk_bmm_" + shape, bmm_flops, half(), {R(q), R(k), W(scores)},
         2 * view_bytes + D(bhtt * element_));
  const int probs = Activation(name + ".probs", bhtt);
  // Scale, mask and softmax, fused as in PyTorch's softmax kernels.
  Kernel(name + ".softmax_fwd_" + shape, 6.0 * D(bhtt), false, {R(scores), W(probs)});
  Unref(scores);
  int mask = -1;
  int dropped = probs;
  if (s.dropout > 0) {
    mask = Workspace(name + ".attn_dropout.mask", bhtt);
    dropped = Activation(name + ".attn_dropout.out", bhtt);
    Kernel(name + ".attn_dropout_fwd_" + shape, 3.0 * D(bhtt), false,
           {R(probs), W(mask), W(dropped)});
  }
  const int context = Activation(name + ".context", bhtd);
  Kernel(name + ".pv_bmm_" + shape, bmm_flops, half(), {R(dropped), R(v), W(context)},
         view_bytes + D(bhtt * element_) + D(bhtd * element_));
  // transpose(1, 2).contiguous(): [B, H, T, D] -> [B, T, H*D].
  const int merged = Activation(name + ".merged", bhtd);
  Kernel(name + ".merge_heads_" + shape, 0, false, {R(context), W(merged)});
  Unref(context);

  TapeEntry entry{{merged}, {}, nullptr};
  Save(entry, q);
  if (!fused) {
    Save(entry, k);
    Save(entry, v);
  }
  Save(entry, probs);
  if (mask >= 0) {
    Save(entry, mask);
    Save(entry, dropped);
  }
  entry.backward = [=, this](const std::vector<int>& g) {
    const int g_context = NewTensor(name + ".context.grad", bhtd * element_,
                                    TensorRole::kGradient, false);
    Kernel(name + ".merge_heads_bwd_" + shape, 0, false, {R(g[0]), W(g_context)});
    const int g_dropped = NewTensor(name + ".probs_dropped.grad", bhtt * element_,
                                    TensorRole::kGradient, false);
    Kernel(name + ".pv_bmm_dgrad_p_" + shape, bmm_flops, half(),
           {R(g_context), R(v), W(g_dropped)});
    const int g_v = NewTensor(name + ".v.grad", bhtd * element_, TensorRole::kGradient, false);
    Kernel(name + ".pv_bmm_dgrad_v_" + shape, bmm_flops, half(),
           {R(dropped), R(g_context), W(g_v)});
    Unref(g_context);
    int g_probs = g_dropped;
    if (mask >= 0) {
      g_probs = NewTensor(name + ".probs.grad", bhtt * element_, TensorRole::kGradient, false);
      Kernel(name + ".attn_dropout_bwd_" + shape, 2.0 * D(bhtt), false,
             {R(g_dropped), R(mask), W(g_probs)});
      Unref(g_dropped);
    }
    const int g_scores =
        NewTensor(name + ".scores.grad", bhtt * element_, TensorRole::kGradient, false);
    Kernel(name + ".softmax_bwd_" + shape, 4.0 * D(bhtt), false,
           {R(g_probs), R(probs), W(g_scores)});
    Unref(g_probs);
    const int g_q = NewTensor(name + ".q.grad", bhtd * element_, TensorRole::kGradient, false);
    Kernel(name + ".qk_bmm_dgrad_q_" + shape, bmm_flops, half(),
           {R(g_scores), R(k), W(g_q)});
    const int g_k = NewTensor(name + ".k.grad", bhtd * element_, TensorRole::kGradient, false);
    Kernel(name + ".qk_bmm_dgrad_k_" + shape, bmm_flops, half(),
           {R(g_scores), R(q), W(g_k)});
    Unref(g_scores);
    AttentionInputGrads(name + ".qkv_split_bwd_" + shape, fused ? q : -1, q, k, v, g_q, g_k,
                        g_v);
  };
  Record(std::move(entry));
  Unref(probs);
  if (mask >= 0) {
    Unref(mask);
    Unref(dropped);
  }
  Unref(q);
  if (!fused) {
    Unref(k);
    Unref(v);
  }
  return merged;
}

int TrainingGraph::BatchNorm2d(const NormLayer& layer, int x, ImageShape s) {
  const uint64_t elements = s.elements();
  const int y = Activation(layer.name + ".out", elements);
  // save_mean and save_invstd per channel, fp32.
  const int mean = Workspace(layer.name + ".save_mean", layer.channels * 4);
  const int invstd = Workspace(layer.name + ".save_invstd", layer.channels * 4);
  const std::string shape = absl::StrCat(s.n, "x", s.c, "x", s.h, "x", s.w);
  // BatchNorm2d.forward in training: self.num_batches_tracked.add_(1), a
  // kernel of its own before cuDNN's.
  Kernel(layer.name + ".num_batches_tracked_add", 1, false,
         {R(layer.num_batches_tracked), W(layer.num_batches_tracked)});
  Kernel(layer.name + ".batch_norm_fwd_" + shape, 8.0 * D(elements), false,
         {R(x), R(layer.weight), R(layer.bias), R(layer.running_mean), R(layer.running_var),
          W(y), W(layer.running_mean), W(layer.running_var), W(mean), W(invstd)});
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, x);
  Save(entry, mean);
  Save(entry, invstd);
  entry.backward = [this, layer, x, mean, invstd, elements, shape](const std::vector<int>& g) {
    const int gx = Grad(x, Bytes(x));
    const int gw = Grad(layer.weight, Bytes(layer.weight));
    const int gb = Grad(layer.bias, Bytes(layer.bias));
    Kernel(layer.name + ".batch_norm_bwd_" + shape, 12.0 * D(elements), false,
           {R(g[0]), R(x), R(layer.weight), R(mean), R(invstd), W(gx), W(gw), W(gb)});
    AddGrad(x, gx);
    AddGrad(layer.weight, gw);
    AddGrad(layer.bias, gb);
  };
  Record(std::move(entry));
  Unref(mean);
  Unref(invstd);
  Unref(x);
  return y;
}

int TrainingGraph::MaxPool2d(int x, const std::string& name, ImageShape in, uint64_t kernel,
                             uint64_t stride, uint64_t padding, ImageShape* out) {
  ImageShape o{in.n, in.c, (in.h + 2 * padding - kernel) / stride + 1,
               (in.w + 2 * padding - kernel) / stride + 1};
  *out = o;
  const int y = Activation(name + ".out", o.elements());
  // max_pool2d_with_indices keeps an int64 argmax per output element.
  const int indices = Workspace(name + ".indices", o.elements() * 8);
  const std::string shape = absl::StrCat(in.n, "x", in.c, "x", in.h, "x", in.w, "_k", kernel);
  Kernel(name + ".max_pool_fwd_" + shape, D(o.elements() * kernel * kernel), false,
         {R(x), W(y), W(indices)});
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, indices);
  entry.backward =
      SavedTensorBackward(x, indices, name + ".max_pool_bwd_" + shape, D(o.elements()));
  Record(std::move(entry));
  Unref(indices);
  Unref(x);
  return y;
}

int TrainingGraph::GlobalAvgPool(int x, const std::string& name, ImageShape in) {
  const int y = Activation(name + ".out", in.n * in.c);
  const std::string shape = absl::StrCat(in.n, "x", in.c, "x", in.h, "x", in.w);
  Kernel(name + ".avg_pool_fwd_" + shape, D(in.elements()), false, {R(x), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  entry.backward = [this, x, name, shape, in](const std::vector<int>& g) {
    const int gx = Grad(x, Bytes(x));
    Kernel(name + ".avg_pool_bwd_" + shape, D(in.elements()), false, {R(g[0]), W(gx)});
    AddGrad(x, gx);
  };
  Record(std::move(entry));
  Unref(x);
  return y;
}

int TrainingGraph::Concat(const std::vector<int>& inputs, const std::vector<uint64_t>& cols,
                          const std::string& name, uint64_t rows) {
  uint64_t total = 0;
  std::vector<KernelAccess> accesses;
  for (size_t i = 0; i < inputs.size(); ++i) {
    total += cols[i];
    accesses.push_back(R(inputs[i]));
  }
  const int out = Activation(name + ".out", rows * total);
  accesses.push_back(W(out));
  const std::string shape = absl::StrCat(rows, "x", total, "_", inputs.size());
  Kernel(name + ".cat_" + shape, 0, false, std::move(accesses));
  TapeEntry entry{{out}, {}, nullptr};
  entry.backward = [this, inputs, name, shape](const std::vector<int>& g) {
    // CatBackward: each input's gradient is a slice of the output's.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!RequiresGrad(inputs[i])) continue;
      const int gi = Grad(inputs[i], Bytes(inputs[i]));
      Kernel(absl::StrCat(name, ".cat_bwd_", i, "_", shape), 0, false, {R(g[0]), W(gi)});
      AddGrad(inputs[i], gi);
    }
  };
  Record(std::move(entry));
  for (int input : inputs) Unref(input);
  return out;
}

int TrainingGraph::DotInteraction(int features, const std::string& name, uint64_t batch,
                                  uint64_t count, uint64_t dim) {
  const uint64_t pairs = count * (count - 1) / 2;
  const std::string shape = absl::StrCat(batch, "x", count, "x", dim);
  const int z = Activation(name + ".z", batch * count * count);
  const double flops = 2.0 * D(batch) * D(count * count) * D(dim);
  Kernel(name + ".bmm_" + shape, flops, half(), {R(features), W(z)});
  // Zflat = Z[:, li, lj]: an index (gather) kernel.
  const int flat = Activation(name + ".zflat", batch * pairs);
  Kernel(name + ".tril_index_" + shape, 0, false, {R(z), W(flat)});
  Unref(z);
  TapeEntry entry{{flat}, {}, nullptr};
  Save(entry, features);
  entry.backward = [=, this](const std::vector<int>& g) {
    // index backward: a zeroed [B, F, F] gradient with the pairs put back.
    const int gz = NewTensor(name + ".z.grad", batch * count * count * element_,
                             TensorRole::kGradient, false);
    Kernel(name + ".tril_index_bwd_" + shape, 0, false, {R(g[0]), W(gz)});
    const int gf = Grad(features, Bytes(features));
    // BmmBackward for T T^T: grad = gZ T + gZ^T T.
    Kernel(name + ".bmm_bwd_" + shape, 2.0 * flops, half(), {R(gz), R(features), W(gf)});
    Unref(gz);
    AddGrad(features, gf);
  };
  Record(std::move(entry));
  Unref(features);
  return flat;
}

int TrainingGraph::CrossEntropy(int logits, int labels, const std::string& name,
                                uint64_t rows, uint64_t classes) {
  const uint64_t elements = rows * classes;
  const std::string shape = absl::StrCat(rows, "x", classes);
  const int lsm = Activation(name + ".log_softmax", elements);
  Kernel(name + ".log_softmax_fwd_" + shape, 5.0 * D(elements), false, {R(logits), W(lsm)});
  TapeEntry softmax_entry{{lsm}, {}, nullptr};
  Save(softmax_entry, lsm);  // log_softmax_backward reads its result
  softmax_entry.backward = [this, logits, lsm, name, shape, elements](
                               const std::vector<int>& g) {
    const int gl = Grad(logits, Bytes(logits));
    Kernel(name + ".log_softmax_bwd_" + shape, 4.0 * D(elements), false,
           {R(g[0]), R(lsm), W(gl)});
    AddGrad(logits, gl);
  };
  Record(std::move(softmax_entry));
  Unref(logits);

  const int loss = Activation(name + ".loss", 1);
  Kernel(name + ".nll_loss_fwd_" + shape, D(rows), false, {R(lsm), R(labels), W(loss)});
  TapeEntry nll_entry{{loss}, {}, nullptr};
  nll_entry.backward = [this, lsm, labels, name, shape, rows](const std::vector<int>& g) {
    const int gl = Grad(lsm, Bytes(lsm));
    Kernel(name + ".nll_loss_bwd_" + shape, D(rows), false, {R(g[0]), R(labels), W(gl)});
    AddGrad(lsm, gl);
  };
  Record(std::move(nll_entry));
  Unref(lsm);
  return loss;
}

int TrainingGraph::BinaryCrossEntropy(int logits, int labels, const std::string& name,
                                      uint64_t elements) {
  const std::string shape = absl::StrCat(elements);
  const int loss = Activation(name + ".loss", 1);
  Kernel(name + ".bce_fwd_" + shape, 6.0 * D(elements), false,
         {R(logits), R(labels), W(loss)});
  TapeEntry entry{{loss}, {}, nullptr};
  Save(entry, logits);
  entry.backward = [this, logits, labels, name, shape, elements](const std::vector<int>& g) {
    const int gl = Grad(logits, Bytes(logits));
    Kernel(name + ".bce_bwd_" + shape, 4.0 * D(elements), false,
           {R(g[0]), R(logits), R(labels), W(gl)});
    AddGrad(logits, gl);
  };
  Record(std::move(entry));
  Unref(logits);
  return loss;
}

}  // namespace umlab
