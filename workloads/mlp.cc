#include "workloads/mlp.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "workloads/caching_allocator.h"

namespace umlab {

// ---------------------------------------------------------------------------
// The program template: tensors, kernels, and the steps that use them.
// ---------------------------------------------------------------------------

namespace {

// What a tensor is, for the footprint breakdown.
enum class TensorRole : uint8_t {
  kParameter,
  kOptimizerState,
  kData,
  kActivation,
  kGradient,
};
constexpr int kTensorRoleCount = 5;

struct TensorSpec {
  std::string name;  // for error messages, e.g. "l3.weight.grad"
  uint64_t bytes = 0;
  TensorRole role = TensorRole::kActivation;
};

struct KernelAccess {
  int tensor = 0;
  AccessType access = AccessType::kRead;
};

struct KernelSpec {
  std::string name;  // encodes layer and shapes, so it identifies the launch
  Nanos duration_ns = 0;
  std::vector<KernelAccess> accesses;
};

struct ProgramStep {
  enum class Kind : uint8_t { kIterationBegin, kAllocate, kRelease, kLaunch };
  Kind kind = Kind::kLaunch;
  int index = 0;  // a tensor (allocate, release) or a kernel (launch)
};

}  // namespace

// Kernel k has execution id k + 1: kernels are numbered as the program first
// launches them, so ids are small, dense and in order of first appearance,
// like the ids DeepUM's runtime hands out.
class MlpProgram {
 public:
  std::vector<TensorSpec> tensors;
  std::vector<KernelSpec> kernels;
  std::vector<ProgramStep> setup;      // runs once, before iteration 0
  std::vector<ProgramStep> iteration;  // runs `iterations` times
  int iterations = 0;
};

namespace {

uint64_t ElementBytes(MlpPrecision precision) {
  return precision == MlpPrecision::kFp32 ? 4 : 2;
}

const char* PrecisionName(MlpPrecision precision) {
  switch (precision) {
    case MlpPrecision::kFp32: return "fp32";
    case MlpPrecision::kFp16: return "fp16";
    case MlpPrecision::kBf16: return "bf16";
  }
  return "?";
}

const char* OptimizerName(MlpOptimizer optimizer) {
  return optimizer == MlpOptimizer::kAdam ? "adam" : "sgd";
}

// Appends steps to one list (setup or iteration) and registers kernels in
// the order they are first launched.
class ProgramBuilder {
 public:
  ProgramBuilder(MlpProgram& program, const ComputeSpec& spec)
      : program_(program), spec_(spec) {}

  void Into(std::vector<ProgramStep>* steps) { steps_ = steps; }

  int Tensor(std::string name, uint64_t bytes, TensorRole role) {
    program_.tensors.push_back(TensorSpec{std::move(name), bytes, role});
    return static_cast<int>(program_.tensors.size()) - 1;
  }

  void Allocate(int tensor) { steps_->push_back({ProgramStep::Kind::kAllocate, tensor}); }
  void Release(int tensor) { steps_->push_back({ProgramStep::Kind::kRelease, tensor}); }
  void IterationBegin() { steps_->push_back({ProgramStep::Kind::kIterationBegin, 0}); }

  // Launches kernel `name`. Its duration is the roofline time of `flops` and
  // of the bytes its accesses move; `tensor_cores` picks the peak for
  // half-precision matrix products.
  void Launch(const std::string& name, double flops, bool tensor_cores,
              std::vector<KernelAccess> accesses) {
    auto [it, inserted] =
        kernel_index_.try_emplace(name, static_cast<int>(program_.kernels.size()));
    if (inserted) {
      double bytes = 0;
      for (const KernelAccess& access : accesses) {
        bytes += static_cast<double>(program_.tensors[access.tensor].bytes);
      }
      const double peak = tensor_cores ? spec_.peak_flops_tensor : spec_.peak_flops_fp32;
      const double seconds =
          std::max(flops / peak, bytes / spec_.memory_bytes_per_second);
      const double nanos = std::ceil(seconds * 1e9);
      // At least 1 us: no launch on a real GPU is shorter.
      const Nanos duration = nanos < 1000.0 ? 1000 : static_cast<Nanos>(nanos);
      program_.kernels.push_back(KernelSpec{name, duration, std::move(accesses)});
    }
    steps_->push_back({ProgramStep::Kind::kLaunch, it->second});
  }

 private:
  MlpProgram& program_;
  const ComputeSpec& spec_;
  std::vector<ProgramStep>* steps_ = nullptr;
  absl::flat_hash_map<std::string, int> kernel_index_;
};

constexpr AccessType kRead = AccessType::kRead;
constexpr AccessType kWrite = AccessType::kWrite;

std::shared_ptr<const MlpProgram> BuildProgram(const MlpOptions& options,
                                               const ComputeSpec& spec) {
  auto program = std::make_shared<MlpProgram>();
  program->iterations = options.iterations;
  ProgramBuilder build(*program, spec);

  const int layers = options.layers;
  const uint64_t b = static_cast<uint64_t>(options.batch);
  const uint64_t h = static_cast<uint64_t>(options.hidden);
  const uint64_t element = ElementBytes(options.precision);
  const bool half = options.precision != MlpPrecision::kFp32;
  const bool adam = options.optimizer == MlpOptimizer::kAdam;
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
    weights[l] = build.Tensor(absl::StrCat("l", l, ".weight"), h * h * element,
                              TensorRole::kParameter);
    build.Allocate(weights[l]);
    build.Launch(layer("init_weight", l, weight_shape), 0, false,
                 {{weights[l], kWrite}});
    biases[l] = build.Tensor(absl::StrCat("l", l, ".bias"), h * element,
                             TensorRole::kParameter);
    build.Allocate(biases[l]);
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
      const int state = build.Tensor(absl::StrCat(param_name, ".", state_name),
                                     param_bytes, TensorRole::kOptimizerState);
      build.Allocate(state);
      build.Launch(absl::StrCat("zero_", state_name, "_", p.kind, "_l", p.layer, "_",
                                p.shape),
                   0, false, {{state, kWrite}});
      p.state.push_back(state);
    }
  }
  const int input = build.Tensor("input", b * h * element, TensorRole::kData);
  build.Allocate(input);
  build.Launch(absl::StrCat("load_input_", act_shape), 0, false, {{input, kWrite}});
  const int target = build.Tensor("target", b * h * element, TensorRole::kData);
  build.Allocate(target);
  build.Launch(absl::StrCat("load_target_", act_shape), 0, false, {{target, kWrite}});

  // --- One training iteration. ---
  build.Into(&program->iteration);
  build.IterationBegin();

  // Forward. outputs[l] is layer l's ReLU output: saved for ReLU backward
  // and, as the next layer's input, for that layer's weight gradient.
  std::vector<int> outputs(layers);
  int x = input;
  for (int l = 0; l < layers; ++l) {
    const int y = build.Tensor(absl::StrCat("l", l, ".linear_out"), b * h * element,
                               TensorRole::kActivation);
    build.Allocate(y);
    build.Launch(layer("gemm_fwd", l, fwd_gemm_shape), gemm_flops, half,
                 {{x, kRead}, {weights[l], kRead}, {y, kWrite}});
    outputs[l] = build.Tensor(absl::StrCat("l", l, ".relu_out"), b * h * element,
                              TensorRole::kActivation);
    build.Allocate(outputs[l]);
    build.Launch(layer("bias_relu_fwd", l, act_shape), 2.0 * bd * hd, false,
                 {{y, kRead}, {biases[l], kRead}, {outputs[l], kWrite}});
    build.Release(y);  // nobody saved the pre-activation
    x = outputs[l];
  }
  const int last = outputs[layers - 1];
  const int loss = build.Tensor("loss", element, TensorRole::kActivation);
  build.Allocate(loss);
  build.Launch(absl::StrCat("mse_loss_fwd_", act_shape), 3.0 * bd * hd, false,
               {{last, kRead}, {target, kRead}, {loss, kWrite}});

  // Backward.
  int grad_out = build.Tensor(absl::StrCat("l", layers - 1, ".relu_out.grad"),
                              b * h * element, TensorRole::kGradient);
  build.Allocate(grad_out);
  build.Launch(absl::StrCat("mse_loss_bwd_", act_shape), 3.0 * bd * hd, false,
               {{last, kRead}, {target, kRead}, {grad_out, kWrite}});
  std::vector<int> weight_grads(layers), bias_grads(layers);
  for (int l = layers - 1; l >= 0; --l) {
    const int grad_y = build.Tensor(absl::StrCat("l", l, ".linear_out.grad"),
                                    b * h * element, TensorRole::kGradient);
    build.Allocate(grad_y);
    build.Launch(layer("relu_bwd", l, act_shape), bd * hd, false,
                 {{grad_out, kRead}, {outputs[l], kRead}, {grad_y, kWrite}});
    build.Release(grad_out);
    build.Release(outputs[l]);  // its last reader (layer l+1 ran already)

    // AddmmBackward: bias, then input, then weight gradient.
    bias_grads[l] = build.Tensor(absl::StrCat("l", l, ".bias.grad"), h * element,
                                 TensorRole::kGradient);
    build.Allocate(bias_grads[l]);
    build.Launch(layer("bias_grad", l, act_shape), bd * hd, false,
                 {{grad_y, kRead}, {bias_grads[l], kWrite}});
    int grad_x = -1;
    if (l > 0) {
      grad_x = build.Tensor(absl::StrCat("l", l - 1, ".relu_out.grad"),
                            b * h * element, TensorRole::kGradient);
      build.Allocate(grad_x);
      build.Launch(layer("gemm_dgrad", l, fwd_gemm_shape), gemm_flops, half,
                   {{grad_y, kRead}, {weights[l], kRead}, {grad_x, kWrite}});
    }
    weight_grads[l] = build.Tensor(absl::StrCat("l", l, ".weight.grad"), h * h * element,
                                   TensorRole::kGradient);
    build.Allocate(weight_grads[l]);
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

// ---------------------------------------------------------------------------
// The stream: interprets the program step by step.
// ---------------------------------------------------------------------------

class MlpEventSource final : public EventSource {
 public:
  explicit MlpEventSource(std::shared_ptr<const MlpProgram> program)
      : program_(std::move(program)),
        allocator_(CachingAllocatorOptions{},
                   [this](const Event& event) { pending_.push_back(event); }),
        addresses_(program_->tensors.size(), 0),
        defined_(program_->kernels.size(), false) {}

  // The allocator's sink points at this object.
  MlpEventSource(const MlpEventSource&) = delete;
  MlpEventSource& operator=(const MlpEventSource&) = delete;

  bool Next(Event& event) override {
    while (pending_.empty()) {
      if (done_) return false;
      RunStep();
    }
    event = std::move(pending_.front());
    pending_.pop_front();
    return true;
  }

  absl::Status status() const override { return status_; }

  const CachingAllocatorStats& allocator_stats() const { return allocator_.stats(); }
  uint64_t peak_live_bytes(TensorRole role) const {
    return peak_live_[static_cast<int>(role)];
  }

 private:
  const std::vector<ProgramStep>& Steps() const {
    return iteration_ < 0 ? program_->setup : program_->iteration;
  }

  void RunStep() {
    while (step_ == Steps().size()) {
      if (iteration_ + 1 >= program_->iterations) {
        done_ = true;
        return;
      }
      ++iteration_;
      step_ = 0;
    }
    const ProgramStep& step = Steps()[step_++];
    switch (step.kind) {
      case ProgramStep::Kind::kIterationBegin: {
        Event event;
        event.kind = EventKind::kIterationBegin;
        event.iteration = static_cast<uint64_t>(iteration_);
        pending_.push_back(std::move(event));
        break;
      }
      case ProgramStep::Kind::kAllocate: {
        const TensorSpec& tensor = program_->tensors[step.index];
        absl::StatusOr<AllocatedBlock> block = allocator_.Allocate(tensor.bytes);
        if (!block.ok()) return Fail(tensor, block.status());
        addresses_[step.index] = block->address;
        uint64_t& live = live_[static_cast<int>(tensor.role)];
        uint64_t& peak = peak_live_[static_cast<int>(tensor.role)];
        live += tensor.bytes;
        peak = std::max(peak, live);
        break;
      }
      case ProgramStep::Kind::kRelease: {
        const TensorSpec& tensor = program_->tensors[step.index];
        if (absl::Status freed = allocator_.Free(addresses_[step.index]); !freed.ok()) {
          return Fail(tensor, freed);
        }
        addresses_[step.index] = 0;
        live_[static_cast<int>(tensor.role)] -= tensor.bytes;
        break;
      }
      case ProgramStep::Kind::kLaunch:
        Launch(step.index);
        break;
    }
  }

  void Launch(int kernel_index) {
    const KernelSpec& kernel = program_->kernels[kernel_index];
    const uint32_t exec_id = static_cast<uint32_t>(kernel_index) + 1;
    Event event;
    event.exec_id = exec_id;
    if (!defined_[kernel_index]) {
      defined_[kernel_index] = true;
      event.kind = EventKind::kKernelDefine;
      event.name = kernel.name;
      pending_.push_back(event);
      event.name.clear();
    }
    event.kind = EventKind::kKernelBegin;
    event.duration_ns = kernel.duration_ns;
    pending_.push_back(event);
    event.duration_ns = 0;
    event.kind = EventKind::kAccess;
    for (const KernelAccess& access : kernel.accesses) {
      event.access = access.access;
      event.address = addresses_[access.tensor];
      event.size = program_->tensors[access.tensor].bytes;
      pending_.push_back(event);
    }
    event.kind = EventKind::kKernelEnd;
    event.access = AccessType::kRead;
    event.address = 0;
    event.size = 0;
    pending_.push_back(std::move(event));
  }

  void Fail(const TensorSpec& tensor, const absl::Status& cause) {
    const std::string where =
        iteration_ < 0 ? std::string("setup") : absl::StrCat("iteration ", iteration_);
    status_ = absl::Status(cause.code(),
                           absl::StrFormat("mlp: %s, tensor %s (%s): %s", where,
                                           tensor.name, FormatBytes(tensor.bytes),
                                           cause.message()));
    done_ = true;
  }

  std::shared_ptr<const MlpProgram> program_;
  std::deque<Event> pending_;
  CachingAllocator allocator_;
  std::vector<uint64_t> addresses_;  // per tensor; valid while allocated
  std::vector<bool> defined_;        // per kernel: kKernelDefine emitted
  int iteration_ = -1;               // -1 while in setup
  size_t step_ = 0;
  bool done_ = false;
  absl::Status status_;
  std::array<uint64_t, kTensorRoleCount> live_{};
  std::array<uint64_t, kTensorRoleCount> peak_live_{};
};

// Range limits: wide enough for any real MLP, narrow enough that no size
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
       "number of Linear+ReLU layers"},
      {"hidden", ParamType::kInt, absl::StrCat(defaults.hidden),
       "width of every layer (input and output features)"},
      {"batch", ParamType::kInt, absl::StrCat(defaults.batch), "samples per batch"},
      {"iterations", ParamType::kInt, absl::StrCat(defaults.iterations),
       "training iterations"},
      {"precision", ParamType::kString, PrecisionName(defaults.precision),
       "element type of every tensor: fp32, fp16 or bf16 (half types use tensor "
       "cores for GEMMs)"},
      {"optimizer", ParamType::kString, OptimizerName(defaults.optimizer),
       "sgd (momentum buffer) or adam (exp_avg, exp_avg_sq)"},
  };
}

absl::StatusOr<MlpOptions> MlpOptionsFromParams(const ParamMap& params) {
  MlpOptions options;
  struct IntParam {
    const char* name;
    int64_t low, high;
    int* target;
  };
  const IntParam ints[] = {
      {"layers", 1, kMaxLayers, &options.layers},
      {"hidden", 1, kMaxHidden, &options.hidden},
      {"batch", 1, kMaxBatch, &options.batch},
      {"iterations", 1, 1'000'000'000, &options.iterations},
  };
  for (const IntParam& p : ints) {
    const int64_t value = params.Int(p.name);
    if (value < p.low || value > p.high) {
      return absl::InvalidArgumentError(
          absl::StrFormat("workload mlp: %s=%d is out of range; use %d to %d", p.name,
                          value, p.low, p.high));
    }
    *p.target = static_cast<int>(value);
  }
  const std::string& precision = params.String("precision");
  if (precision == "fp32") {
    options.precision = MlpPrecision::kFp32;
  } else if (precision == "fp16") {
    options.precision = MlpPrecision::kFp16;
  } else if (precision == "bf16") {
    options.precision = MlpPrecision::kBf16;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "workload mlp: precision=%s is not known; use fp32, fp16 or bf16", precision));
  }
  const std::string& optimizer = params.String("optimizer");
  if (optimizer == "adam") {
    options.optimizer = MlpOptimizer::kAdam;
  } else if (optimizer == "sgd") {
    options.optimizer = MlpOptimizer::kSgd;
  } else {
    return absl::InvalidArgumentError(absl::StrFormat(
        "workload mlp: optimizer=%s is not known; use sgd or adam", optimizer));
  }
  return options;
}

MlpWorkload::MlpWorkload(const MlpOptions& options,
                         std::shared_ptr<const MlpProgram> program)
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
  return std::make_unique<MlpEventSource>(program_);
}

absl::StatusOr<MlpFootprint> MlpWorkload::Footprint() const {
  MlpFootprint footprint;
  for (const TensorSpec& tensor : program_->tensors) {
    if (tensor.role == TensorRole::kParameter) footprint.parameter_bytes += tensor.bytes;
    if (tensor.role == TensorRole::kOptimizerState) {
      footprint.optimizer_state_bytes += tensor.bytes;
    }
    if (tensor.role == TensorRole::kData) footprint.data_bytes += tensor.bytes;
  }
  for (const ProgramStep& step : program_->iteration) {
    if (step.kind != ProgramStep::Kind::kLaunch) continue;
    ++footprint.kernels_per_iteration;
    footprint.compute_ns_per_iteration += program_->kernels[step.index].duration_ns;
  }
  footprint.distinct_kernels = static_cast<int>(program_->kernels.size());

  MlpEventSource source(program_);
  Event event;
  while (source.Next(event)) ++footprint.events;
  if (!source.status().ok()) return source.status();
  footprint.peak_activation_bytes = source.peak_live_bytes(TensorRole::kActivation);
  footprint.peak_gradient_bytes = source.peak_live_bytes(TensorRole::kGradient);
  footprint.peak_allocated_bytes = source.allocator_stats().peak_allocated_bytes;
  footprint.peak_reserved_bytes = source.allocator_stats().peak_reserved_bytes;
  return footprint;
}

std::string MlpWorkload::Describe() const {
  const MlpOptions& o = options_;
  std::string text = absl::StrFormat(
      "mlp: %d x (Linear(%d, %d) + ReLU), batch %d, %s, %s, %d iterations, MSE loss\n",
      o.layers, o.hidden, o.hidden, o.batch, PrecisionName(o.precision),
      OptimizerName(o.optimizer), o.iterations);
  absl::StatusOr<MlpFootprint> f = Footprint();
  if (!f.ok()) return absl::StrCat(text, "  cannot run: ", f.status().message(), "\n");
  absl::StrAppendFormat(&text, "  parameters        %s\n", FormatBytes(f->parameter_bytes));
  absl::StrAppendFormat(&text, "  optimizer state   %s (%s)\n",
                        FormatBytes(f->optimizer_state_bytes),
                        o.optimizer == MlpOptimizer::kAdam ? "exp_avg, exp_avg_sq"
                                                           : "momentum_buffer");
  absl::StrAppendFormat(&text, "  input + target    %s\n", FormatBytes(f->data_bytes));
  absl::StrAppendFormat(&text, "  peak activations  %s\n",
                        FormatBytes(f->peak_activation_bytes));
  absl::StrAppendFormat(&text, "  peak gradients    %s\n",
                        FormatBytes(f->peak_gradient_bytes));
  absl::StrAppendFormat(&text, "  peak allocated    %s (caching allocator, blocks)\n",
                        FormatBytes(f->peak_allocated_bytes));
  absl::StrAppendFormat(&text, "  peak reserved     %s (%.0f MB: the footprint)\n",
                        FormatBytes(f->peak_reserved_bytes),
                        static_cast<double>(f->peak_reserved_bytes) / 1e6);
  absl::StrAppendFormat(
      &text, "  kernels           %d per iteration, %d execution ids in all\n",
      f->kernels_per_iteration, f->distinct_kernels);
  absl::StrAppendFormat(&text, "  compute           %.3f ms per iteration (roofline)\n",
                        static_cast<double>(f->compute_ns_per_iteration) / 1e6);
  absl::StrAppendFormat(&text, "  events            %d in the stream\n", f->events);
  return text;
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
