#include "workloads/dnn/mlp.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "workloads/tensor_program.h"

namespace umlab {

namespace {

constexpr AccessType kRead = AccessType::kRead;
constexpr AccessType kWrite = AccessType::kWrite;

std::shared_ptr<const TensorProgram> BuildProgram(const MlpOptions& options,
                                                  const ComputeSpec& spec) {
  auto program = std::make_shared<TensorProgram>();
  program->workload = "mlp";
  program->iterations = options.iterations;
  TensorProgramBuilder build(*program, spec);
  // A new tensor, allocated at once: every tensor of this program is.
  auto allocate = [&build](std::string name, uint64_t bytes, TensorRole role) {
    const int tensor = build.Tensor(std::move(name), bytes, role);
    build.Allocate(tensor);
    return tensor;
  };

  const int layers = options.layers;
  const uint64_t b = static_cast<uint64_t>(options.batch);
  const uint64_t h = static_cast<uint64_t>(options.hidden);
  const uint64_t element = ElementBytes(options.precision);
  const bool half = options.precision != Precision::kFp32;
  const bool adam = options.optimizer == Optimizer::kAdam;
  const double bd = static_cast<double>(b);
  const double hd = static_cast<double>(h);
  const double gemm_flops = 2.0 * bd * hd * hd;

  const std::string act_shape = absl::StrCat(b, "x", h);
  const std::string weight_shape = absl::StrCat(h, "x", h);
  const std::string bias_shape = absl::StrCat(h);
  // GEMM shapes as M x N x K.
  const std::string fwd_gemm_shape = absl::StrCat(b, "x", h, "x", h);
  const std::string wgrad_gemm_shape = absl::StrCat(h, "x", h, "x", b);
  auto layer = [](const char* what, int l, const std::string& shape) {
    return absl::StrCat(what, "_l", l, "_", shape);
  };

  // --- Setup: parameters, optimizer state, data. ---
  build.Into(&program->setup);
  struct Parameter {
    int tensor, grad;
    std::vector<int> state;
    const char* kind;  // "w" or "b", for kernel names
    std::string shape;
    int layer;
  };
  std::vector<Parameter> parameters;  // in model.parameters() order
  std::vector<int> weights(layers), biases(layers);
  for (int l = 0; l < layers; ++l) {
    weights[l] = allocate(absl::StrCat("l", l, ".weight"), h * h * element, TensorRole::kParameter);
    build.Launch(layer("init_weight", l, weight_shape), 0, false,
                 {{weights[l], kWrite}});
    biases[l] = allocate(absl::StrCat("l", l, ".bias"), h * element, TensorRole::kParameter);
    build.Launch(layer("init_bias", l, bias_shape), 0, false, {{biases[l], kWrite}});
    parameters.push_back({weights[l], -1, {}, "w", weight_shape, l});
    parameters.push_back({biases[l], -1, {}, "b", bias_shape, l});
  }
  const std::vector<std::string> state_names =
      adam ? std::vector<std::string>{"exp_avg", "exp_avg_sq"}
           : std::vector<std::string>{"momentum_buffer"};
  for (Parameter& p : parameters) {
    const TensorSpec& param = program->tensors[p.tensor];
    const std::string param_name = param.name;
    const uint64_t param_bytes = param.bytes;
    for (const std::string& state_name : state_names) {
      const int state = allocate(absl::StrCat(param_name, ".", state_name), param_bytes,
                                 TensorRole::kOptimizerState);
      build.Launch(absl::StrCat("zero_", state_name, "_", p.kind, "_l", p.layer, "_",
                                p.shape),
                   0, false, {{state, kWrite}});
      p.state.push_back(state);
    }
  }
  const int input = allocate("input", b * h * element, TensorRole::kData);
  build.Launch(absl::StrCat("load_input_", act_shape), 0, false, {{input, kWrite}});
  const int target = allocate("target", b * h * element, TensorRole::kData);
  build.Launch(absl::StrCat("load_target_", act_shape), 0, false, {{target, kWrite}});

  // --- One training iteration. ---
  build.Into(&program->iteration);
  build.IterationBegin();

  // Forward. outputs[l] is layer l's ReLU output: saved for ReLU backward
  // and, as the next layer's input, for that layer's weight gradient.
  std::vector<int> outputs(layers);
  int x = input;
  for (int l = 0; l < layers; ++l) {
    const int y =
        allocate(absl::StrCat("l", l, ".linear_out"), b * h * element, TensorRole::kActivation);
    build.Launch(layer("gemm_fwd", l, fwd_gemm_shape), gemm_flops, half,
                 {{x, kRead}, GemmWeightRead(weights[l], b), {y, kWrite}});
    outputs[l] =
        allocate(absl::StrCat("l", l, ".relu_out"), b * h * element, TensorRole::kActivation);
    build.Launch(layer("bias_relu_fwd", l, act_shape), 2.0 * bd * hd, false,
                 {{y, kRead}, {biases[l], kRead}, {outputs[l], kWrite}});
    build.Release(y);  // nobody saved the pre-activation
    x = outputs[l];
  }
  const int last = outputs[layers - 1];
  const int loss = allocate("loss", element, TensorRole::kActivation);
  build.Launch(absl::StrCat("mse_loss_fwd_", act_shape), 3.0 * bd * hd, false,
               {{last, kRead}, {target, kRead}, {loss, kWrite}});

  // Backward.
  int grad_out = allocate(absl::StrCat("l", layers - 1, ".relu_out.grad"), b * h * element,
                          TensorRole::kGradient);
  build.Launch(absl::StrCat("mse_loss_bwd_", act_shape), 3.0 * bd * hd, false,
               {{last, kRead}, {target, kRead}, {grad_out, kWrite}});
  std::vector<int> weight_grads(layers), bias_grads(layers);
  for (int l = layers - 1; l >= 0; --l) {
    const int grad_y =
        allocate(absl::StrCat("l", l, ".linear_out.grad"), b * h * element, TensorRole::kGradient);
    build.Launch(layer("relu_bwd", l, act_shape), bd * hd, false,
                 {{grad_out, kRead}, {outputs[l], kRead}, {grad_y, kWrite}});
    build.Release(grad_out);
    build.Release(outputs[l]);  // its last reader (layer l+1 ran already)

    // AddmmBackward: bias, then input, then weight gradient.
    bias_grads[l] =
        allocate(absl::StrCat("l", l, ".bias.grad"), h * element, TensorRole::kGradient);
    build.Launch(layer("bias_grad", l, act_shape), bd * hd, false,
                 {{grad_y, kRead}, {bias_grads[l], kWrite}});
    int grad_x = -1;
    if (l > 0) {
      grad_x = allocate(absl::StrCat("l", l - 1, ".relu_out.grad"), b * h * element,
                        TensorRole::kGradient);
      build.Launch(layer("gemm_dgrad", l, fwd_gemm_shape), gemm_flops, half,
                   {{grad_y, kRead}, GemmWeightRead(weights[l], b), {grad_x, kWrite}});
    }
    weight_grads[l] =
        allocate(absl::StrCat("l", l, ".weight.grad"), h * h * element, TensorRole::kGradient);
    const int layer_input = l == 0 ? input : outputs[l - 1];
    build.Launch(layer("gemm_wgrad", l, wgrad_gemm_shape), gemm_flops, half,
                 {{grad_y, kRead}, {layer_input, kRead}, {weight_grads[l], kWrite}});
    build.Release(grad_y);
    grad_out = grad_x;
  }
  for (Parameter& p : parameters) {
    p.grad = p.tensor == weights[p.layer] ? weight_grads[p.layer] : bias_grads[p.layer];
  }

  // Optimizer step: reads everything it updates, then writes it.
  const char* step_name = adam ? "adam_step" : "sgd_step";
  // Per element: Adam ~12 FLOPs (moments, bias correction, sqrt, divide);
  // SGD with momentum ~4.
  const double flops_per_element = adam ? 12.0 : 4.0;
  for (const Parameter& p : parameters) {
    std::vector<KernelAccess> accesses = {{p.tensor, kRead}, {p.grad, kRead}};
    for (int state : p.state) accesses.push_back({state, kRead});
    accesses.push_back({p.tensor, kWrite});
    for (int state : p.state) accesses.push_back({state, kWrite});
    const double elements =
        static_cast<double>(program->tensors[p.tensor].bytes / element);
    build.Launch(absl::StrCat(step_name, "_", p.kind, "_l", p.layer, "_", p.shape),
                 flops_per_element * elements, false, std::move(accesses));
  }
  // zero_grad(set_to_none=True), then the loss goes out of scope.
  for (const Parameter& p : parameters) build.Release(p.grad);
  build.Release(loss);
  return program;
}

// computation can overflow.
constexpr int kMaxLayers = 4096;
constexpr int kMaxHidden = 1 << 18;
constexpr int kMaxBatch = 1 << 22;

}  // namespace

// ---------------------------------------------------------------------------
// Parameters, the workload, registration.
// ---------------------------------------------------------------------------

std::vector<ParamInfo> MlpParams() {
  const MlpOptions defaults;
  return {
      {"layers", ParamType::kInt, absl::StrCat(defaults.layers),
       "number of Linear+ReLU layers", ParamRange::Closed(1, kMaxLayers)},
      {"hidden", ParamType::kInt, absl::StrCat(defaults.hidden),
       "width of every layer (input and output features)", ParamRange::Closed(1, kMaxHidden)},
      {"batch", ParamType::kInt, absl::StrCat(defaults.batch), "samples per batch",
       ParamRange::Closed(1, kMaxBatch)},
      {"iterations", ParamType::kInt, absl::StrCat(defaults.iterations),
       "training iterations", ParamRange::Closed(1, 1'000'000'000)},
      {"precision", ParamType::kString, PrecisionName(defaults.precision),
       "element type of every tensor: fp32, fp16 or bf16 (half types use tensor "
       "cores for GEMMs)",
       {},
       PrecisionChoices()},
      {"optimizer", ParamType::kString, OptimizerName(defaults.optimizer),
       "sgd (momentum buffer) or adam (exp_avg, exp_avg_sq)", {}, OptimizerChoices()},
  };
}

absl::StatusOr<MlpOptions> MlpOptionsFromParams(const ParamMap& params) {
  MlpOptions options;
  // MlpParams' ranges keep each within int.
  options.layers = static_cast<int>(params.Int("layers"));
  options.hidden = static_cast<int>(params.Int("hidden"));
  options.batch = static_cast<int>(params.Int("batch"));
  options.iterations = static_cast<int>(params.Int("iterations"));
  options.precision = PrecisionParam(params);
  options.optimizer = OptimizerParam(params);
  return options;
}

MlpWorkload::MlpWorkload(const MlpOptions& options,
                         std::shared_ptr<const TensorProgram> program)
    : options_(options), program_(std::move(program)) {}

MlpWorkload::~MlpWorkload() = default;

absl::StatusOr<std::unique_ptr<MlpWorkload>> MlpWorkload::Create(
    const MlpOptions& options, const ComputeSpec& spec) {
  if (options.layers < 1 || options.layers > kMaxLayers || options.hidden < 1 ||
      options.hidden > kMaxHidden || options.batch < 1 || options.batch > kMaxBatch ||
      options.iterations < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "workload mlp: layers=%d hidden=%d batch=%d iterations=%d: each must be at "
        "least 1 (and layers <= %d, hidden <= %d, batch <= %d)",
        options.layers, options.hidden, options.batch, options.iterations, kMaxLayers,
        kMaxHidden, kMaxBatch));
  }
  if (!(spec.peak_flops_fp32 > 0) || !(spec.peak_flops_tensor > 0) ||
      !(spec.memory_bytes_per_second > 0)) {
    return absl::InvalidArgumentError(
        "workload mlp: the device's peak FLOP rates and memory bandwidth must be "
        "positive to derive kernel times");
  }
  return std::unique_ptr<MlpWorkload>(
      new MlpWorkload(options, BuildProgram(options, spec)));
}

std::unique_ptr<EventSource> MlpWorkload::Open() const {
  return OpenTensorProgram(program_);
}

absl::StatusOr<MlpFootprint> MlpWorkload::Footprint() const {
  return MeasureFootprint(program_);
}

std::string MlpWorkload::Describe() const {
  const MlpOptions& o = options_;
  std::string text = absl::StrFormat(
      "mlp: %d x (Linear(%d, %d) + ReLU), batch %d, %s, %s, %d iterations, MSE loss\n",
      o.layers, o.hidden, o.hidden, o.batch, PrecisionName(o.precision),
      OptimizerName(o.optimizer), o.iterations);
  absl::StatusOr<MlpFootprint> f = Footprint();
  if (!f.ok()) return absl::StrCat(text, "  cannot run: ", f.status().message(), "\n");
  return text + DescribeFootprint(*f, o.optimizer == Optimizer::kAdam
                                          ? "exp_avg, exp_avg_sq"
                                          : "momentum_buffer");
}

namespace {

absl::StatusOr<std::unique_ptr<Workload>> MakeMlp(const ParamMap& params,
                                                  const ComputeSpec& spec) {
  absl::StatusOr<MlpOptions> options = MlpOptionsFromParams(params);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<MlpWorkload>> workload =
      MlpWorkload::Create(*options, spec);
  if (!workload.ok()) return workload.status();
  return std::unique_ptr<Workload>(std::move(*workload));
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(
    mlp, {"mlp",
          "multi-layer perceptron training: Linear+ReLU layers, MSE loss, SGD or "
          "Adam, through the PyTorch caching-allocator model",
          MlpParams(), MakeMlp});

}  // namespace umlab