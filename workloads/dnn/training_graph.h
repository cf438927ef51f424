// The layer builders every DNN generator shares: an autograd-style tape over
// a TensorProgram.
//
// A model's forward pass is written as calls like Linear(), LayerNorm() and
// Conv2d(). Each call launches the forward kernel(s) PyTorch would launch,
// allocates the outputs, saves what the op's backward needs (a saved tensor
// stays allocated until that backward kernel has run, as autograd's
// SavedVariable keeps it), and records the backward on a tape. Backward()
// then replays the tape in reverse, as autograd runs nodes in decreasing
// sequence number, accumulating gradients of tensors with several consumers
// out of place (autograd's InputBuffer) and parameter gradients in place
// (AccumulateGrad). Step() launches the optimizer's kernels as PyTorch's
// Adam or SGD does (optimizer_step.cc) and frees every .grad
// (zero_grad(set_to_none=True), PyTorch's default).
//
// Ownership follows Python references: a forward op *consumes* the handle of
// each activation it is given (the model's variable is rebound to the
// output, so PyTorch would drop it). Retain() adds a handle, for a tensor a
// model uses twice (a residual). A tensor is freed when neither a handle nor
// a saved reference is left, and Finish() checks that every activation and
// gradient of the iteration was freed.
//
// Parameters are allocated in the setup phase the first time a layer is
// built (model construction), optimizer states after all parameters.
#ifndef UMLAB_WORKLOADS_DNN_TRAINING_GRAPH_H_
#define UMLAB_WORKLOADS_DNN_TRAINING_GRAPH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/param_map.h"
#include "workloads/tensor_program.h"

namespace umlab {

enum class Precision { kFp32, kFp16, kBf16 };
enum class Optimizer { kSgd, kAdam };
// How attention runs: `sdpa` is PyTorch 2's scaled_dot_product_attention
// (the memory-efficient kernel for fp32, sdpa_attention.cc), what
// transformers 5 and torchvision use by default; `eager` is the explicit
// softmax(q k^T) v of older HuggingFace code, which keeps the T x T
// probabilities for backward (DeepUM's era).
enum class AttentionImpl { kSdpa, kEager };

const char* PrecisionName(Precision precision);
const char* OptimizerName(Optimizer optimizer);
// Bytes of one element: 4 for fp32, 2 for the half types.
uint64_t ElementBytes(Precision precision);

// The `precision` and `optimizer` parameters: their choices, in enum order
// (ParamMap::Resolve checks a value against them), and the enum a resolved
// map holds.
std::vector<std::string> PrecisionChoices();
std::vector<std::string> OptimizerChoices();
// The `attention` parameter of the transformer models.
ParamInfo AttentionParamInfo();
Precision PrecisionParam(const ParamMap& params);
Optimizer OptimizerParam(const ParamMap& params);

// The parameters every DNN generator shares.
struct TrainingOptions {
  int batch = 1;
  int iterations = 3;
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdam;
  bool foreach = true;  // the optimizer's multi-tensor kernels (PyTorch's default)
  // ZeRO-Offload's schedule: the optimizer step on the CPU (StepOnHost).
  bool offload = false;
  AttentionImpl attention = AttentionImpl::kSdpa;
  uint64_t seed = 1;
};

// ParamInfo for batch, iterations, precision, optimizer and seed.
std::vector<ParamInfo> TrainingParams(int default_batch, int default_iterations,
                                      Optimizer default_optimizer);
// The options a map resolved against TrainingParams holds (Resolve has
// checked every value, so this cannot fail); `attention` when the map also
// declares AttentionParamInfo().
TrainingOptions TrainingOptionsFromParams(const ParamMap& params, bool attention = false);

// A layer's parameters, allocated once.
struct LinearLayer {
  std::string name;
  uint64_t in = 0, out = 0;
  int weight = -1, bias = -1;
};
struct NormLayer {  // LayerNorm or BatchNorm2d
  std::string name;
  uint64_t channels = 0;
  int weight = -1, bias = -1;
  int running_mean = -1, running_var = -1, num_batches_tracked = -1;  // BatchNorm buffers
};
struct ConvLayer {
  std::string name;
  uint64_t in = 0, out = 0, kernel = 1, stride = 1, padding = 0, groups = 1;
  int weight = -1, bias = -1;
};
struct EmbeddingLayer {
  std::string name;
  uint64_t rows = 0, dim = 0;
  int weight = -1;
};

// An activation shape for image layers: N x C x H x W.
struct ImageShape {
  uint64_t n = 0, c = 0, h = 0, w = 0;
  uint64_t elements() const { return n * c * h * w; }
};

class TrainingGraph {
 public:
  TrainingGraph(TensorProgram& program, const ComputeSpec& spec, const TrainingOptions& options);

  uint64_t element_bytes() const { return element_; }
  bool half() const { return element_ == 2; }
  const TrainingOptions& options() const { return options_; }
  uint64_t trainable_parameters() const { return trainable_elements_; }

  // --- Parameters (setup phase) ---
  LinearLayer MakeLinear(const std::string& name, uint64_t in, uint64_t out, bool bias);
  NormLayer MakeLayerNorm(const std::string& name, uint64_t channels);
  NormLayer MakeBatchNorm(const std::string& name, uint64_t channels);
  ConvLayer MakeConv(const std::string& name, uint64_t in, uint64_t out, uint64_t kernel,
                     uint64_t stride, uint64_t padding, uint64_t groups, bool bias);
  EmbeddingLayer MakeEmbedding(const std::string& name, uint64_t rows, uint64_t dim);
  // A trainable tensor that is not part of a layer (ViT's cls token).
  int MakeParameter(const std::string& name, uint64_t elements);

  // --- Iteration ---
  void BeginIteration();
  // A batch copied to the device this iteration (DataLoader -> .cuda()):
  // allocated, written by a load kernel, freed at the end of the iteration.
  int LoadInput(const std::string& name, uint64_t bytes);

  void Retain(int tensor);  // one more handle on an activation
  void Drop(int tensor);    // the model lets go of a handle

  // Forward ops. `x` (and every other activation argument) is consumed.
  int Linear(const LinearLayer& layer, int x, uint64_t rows);
  int LayerNorm(const NormLayer& layer, int x, uint64_t rows);
  int Gelu(int x, const std::string& name, uint64_t elements);
  int Tanh(int x, const std::string& name, uint64_t elements);
  // ViT's token assembly: y[B, N+1, C] = cat(cls, x[B, N, C]) + pos, with
  // cls [C] and pos [N+1, C] parameters broadcast over the batch.
  int ClassTokenAndPosition(int x, int cls, int pos, const std::string& name, uint64_t batch,
                            uint64_t tokens, uint64_t dim);
  int Relu(int x, const std::string& name, uint64_t elements, bool inplace);
  // x.contiguous() of a transposed view: a copy (layout_copies.cc).
  int Contiguous(int x, const std::string& name);
  // y += bias, broadcast, as its own kernel (a GEMM that could not fuse
  // it); returns y.
  int AddBiasInPlace(int y, int bias, const std::string& name);
  // nn.ReLU6() out of place: hardtanh, whose backward reads the input.
  int Relu6(int x, const std::string& name, uint64_t elements);
  int Dropout(int x, const std::string& name, uint64_t elements, double p);
  int Add(int a, int b, const std::string& name, uint64_t elements);
  // a += b (torchvision's `out += identity`): returns a.
  int AddInPlace(int a, int b, const std::string& name, uint64_t elements);
  // Embedding lookup of `count` ids; `rows` is how the weight is touched
  // (a gather, or a range for position embeddings). ids is data: not consumed.
  int Embedding(const EmbeddingLayer& layer, int ids, uint64_t count, KernelAccess rows);

  // Scaled dot-product attention as HuggingFace writes it: scores = q k^T,
  // softmax with the scale and mask fused, dropout, context = p v, then the
  // heads merged back into [B, T, C]. With `qkv_fused`, q, k and v are views
  // of one [B, T, 3C] tensor (GPT-2's c_attn, timm's qkv): pass it as q and
  // -1 for k and v; their gradients are concatenated back into one.
  struct AttentionShape {
    uint64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
    double dropout = 0;
    // transformers 5's GPT-2 copies k and v into its DynamicCache (sdpa only).
    bool kv_cache_copies = false;
    // torchvision's MultiheadAttention: q, k and v are selected from the
    // packed projection, so their gradients are copied back through the
    // transposes and assembled into zeros (sdpa only).
    bool packed_selects = false;
  };
  // Runs options().attention's implementation.
  int Attention(const std::string& name, const AttentionShape& shape, int q, int k, int v);
  // GPT-2's gelu_new, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as
  // transformers' NewGELUActivation writes it: eight elementwise kernels
  // forward, eleven backward, four intermediates saved (gelu_tanh.cc).
  int GeluTanhComposed(int x, const std::string& name, uint64_t elements);

  // A convolution as cuDNN runs it under PyTorch (convolution.cc).
  int Conv2d(const ConvLayer& layer, int x, ImageShape in, ImageShape* out);
  int BatchNorm2d(const NormLayer& layer, int x, ImageShape shape);
  int MaxPool2d(int x, const std::string& name, ImageShape in, uint64_t kernel,
                uint64_t stride, uint64_t padding, ImageShape* out);
  // Adaptive average pooling to 1x1: [N, C, H, W] -> [N, C].
  int GlobalAvgPool(int x, const std::string& name, ImageShape in);
  // out[rows, sum(cols)] = cat(inputs[i][rows, cols[i]]) along the last dim.
  int Concat(const std::vector<int>& inputs, const std::vector<uint64_t>& cols,
             const std::string& name, uint64_t rows);
  // DLRM's dot interaction: the pairwise dot products of `features` vectors
  // of `dim` per sample, strictly lower triangle, concatenated after the
  // dense vector: [B, F, D] -> [B, D + F(F-1)/2].
  int DotInteraction(int features, const std::string& name, uint64_t batch, uint64_t count,
                     uint64_t dim);
  // The mean cross entropy of logits [rows, classes] against data labels
  // (log_softmax saving its output, then nll_loss). Returns the loss.
  int CrossEntropy(int logits, int labels, const std::string& name, uint64_t rows,
                   uint64_t classes);
  // Binary cross entropy with logits over `elements` (DLRM, DCGAN).
  int BinaryCrossEntropy(int logits, int labels, const std::string& name, uint64_t elements);

  // loss.backward(): seeds d(loss) = 1 and runs the tape in reverse.
  void Backward(int loss);
  // optimizer.step(), then zero_grad(set_to_none=True): on the GPU, or
  // with `offload` on the CPU (StepOnHost).
  void Step();
  // Ends the iteration: frees the inputs and checks nothing leaked.
  absl::Status Finish();

  // Sparse embedding gradient (DLRM's EmbeddingBag(sparse=True) under SGD):
  // the backward and the update touch only the rows the forward gathered.
  void MarkSparse(const EmbeddingLayer& layer, KernelAccess rows);

  TensorProgramBuilder& builder() { return build_; }

 private:
  // Shorthands for the layer builders, in every file that defines one:
  // whole-tensor reads and writes, and a count as a double for FLOPs.
  static KernelAccess R(int tensor) { return {tensor, AccessType::kRead}; }
  static KernelAccess W(int tensor) { return {tensor, AccessType::kWrite}; }
  static double D(uint64_t value) { return static_cast<double>(value); }

  struct Handle {
    int refs = 0;           // handles + saved references
    bool requires_grad = false;
    bool parameter = false;  // and optimizer state: never freed
    bool input = false;      // the batch: freed by Finish()
  };
  struct TapeEntry {
    std::vector<int> outputs;
    std::vector<int> saved;
    std::function<void(const std::vector<int>& output_grads)> backward;
  };
  struct ParameterInfo {
    int tensor = -1;
    std::string name;
    uint64_t elements = 0;
    bool sparse = false;
    KernelAccess sparse_rows;
    std::vector<int> state;
  };

  int NewTensor(const std::string& name, uint64_t bytes, TensorRole role, bool requires_grad);
  int Activation(const std::string& name, uint64_t elements, bool requires_grad = true);
  int Unary(int x, const std::string& name, const std::string& fn, uint64_t elements,
            double forward_flops, double backward_flops);
  int Workspace(const std::string& name, uint64_t bytes);
  int Grad(int of, uint64_t bytes);
  int AddParameter(const std::string& name, uint64_t elements, bool trainable);
  void Kernel(const std::string& name, double flops, bool tensor_cores,
              std::vector<KernelAccess> accesses, double bytes = -1);
  void Unref(int tensor);
  void Save(TapeEntry& entry, int tensor);
  bool RequiresGrad(int tensor) const { return handles_[tensor].requires_grad; }
  void Record(TapeEntry entry);
  // Records a sum of a and b (out of place or into a) as `output`:
  // AddBackward hands the same gradient to both inputs.
  void RecordSum(int output, int a, int b);
  // y = x * weight (+ bias) in one kernel (Linear's addmm, Conv2d): it
  // reads x, the weight and the bias (-1: none) and writes y. `rows` is the
  // GEMM's M (x's rows; a convolution's output positions): the weight is
  // read once per tile of them (GemmWeightRead).
  void WeightedForward(const std::string& kernel, double flops, int x, int weight, int bias,
                       int y, uint64_t rows);
  // That op's input and weight gradients: `prefix`_dgrad_`shape` (only when
  // x requires a gradient) reads gy and the weight, once per tile of `rows`
  // (gy's rows, or the input positions); `prefix`_wgrad_`shape` reads gy
  // and x.
  void WeightedBackward(const std::string& prefix, const std::string& shape, double flops,
                        int x, int weight, int gy, uint64_t rows);
  int EagerAttention(const std::string& name, const AttentionShape& shape, int q, int k, int v);
  // Hands attention's q, k and v gradients back; with a fused projection
  // (`packed` >= 0, q, k and v its views) SplitBackward concatenates them
  // into its gradient with kernel `split_kernel`.
  void AttentionInputGrads(const std::string& split_kernel, int packed, int q, int k, int v,
                           int g_q, int g_k, int g_v);
  int SdpaAttention(const std::string& name, const AttentionShape& shape, int q, int k, int v);
  // A full-size embedding gradient for `count` lookups of `ids`
  // (embedding_backward.cc); returns it.
  int EmbeddingDenseBackward(const EmbeddingLayer& layer, int ids, uint64_t count, int gy);
  // A copy of `tensor` in NHWC layout, in workspace, by kernel `kernel`
  // (cuDNN's layout transforms, convolution.cc).
  int NhwcCopy(const std::string& kernel, int tensor);
  // A bias gradient: one kernel reads gy and writes it.
  void BiasBackward(const std::string& kernel, double flops, int bias, int gy);
  // One list of a foreach op: its tensors and whether the op reads and
  // writes them.
  struct ForeachList {
    std::vector<int> tensors;
    bool read = true;
    bool write = false;
  };
  // A foreach op (torch._foreach_`op`) over lists of equally shaped tensors,
  // launched as multi_tensor_apply launches it; each launch reads and
  // writes only its chunks.
  void Foreach(const std::string& op, const std::vector<ForeachList>& lists, bool scalar_list,
               double flops_per_element);
  // The optimizer's state for every dense parameter, allocated in setup.
  void AllocateOptimizerState();
  // PyTorch's Adam or SGD on the GPU, as the header comment of
  // optimizer_step.cc spells out.
  void StepOnDevice();
  // ZeRO-Offload's step (Ren et al., ATC '21, §4): the update runs on the
  // CPU, one host kernel per parameter, the last one the model made first,
  // over fp32 master weights and optimizer state that live in the host's
  // pinned memory (not in the program's managed memory: no GPU kernel
  // touches them). Each kernel reads the parameter's gradient and writes
  // the parameter, so the gradient leaves the device before it and the
  // device's copy of the parameter is stale after it, as the fp16
  // parameters ZeRO-Offload copies back each iteration are.
  void StepOnHost();
  // The backward of an op on x that one kernel computes from the output's
  // gradient and one saved tensor (GELU, ReLU, dropout, max pool): it reads
  // both and writes x's gradient.
  std::function<void(const std::vector<int>&)> SavedTensorBackward(int x, int saved,
                                                                   std::string kernel,
                                                                   double flops);
  // Routes a gradient to `tensor`: sets it, or accumulates.
  void AddGrad(int tensor, int grad);
  uint64_t Bytes(int tensor) const { return build_.tensor(tensor).bytes; }
  const std::string& Name(int tensor) const { return build_.tensor(tensor).name; }

  TensorProgram& program_;
  TensorProgramBuilder build_;
  TrainingOptions options_;
  uint64_t element_;
  uint64_t trainable_elements_ = 0;
  std::vector<Handle> handles_;  // per tensor of the program
  std::vector<int> grad_;        // per tensor: its gradient tensor, or -1
  std::vector<TapeEntry> tape_;
  std::vector<ParameterInfo> parameters_;  // trainable, in creation order
  std::vector<int> inputs_;                // loaded this iteration
  absl::flat_hash_map<int, int> grad_sums_;  // per tensor: gradients summed so far
  int first_iteration_tensor_ = 0;
};

// "1.558 B" style: parameters in billions or millions.
std::string FormatParameterCount(uint64_t parameters);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_TRAINING_GRAPH_H_
