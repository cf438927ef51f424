// The `mlp` workload: a multi-layer perceptron trained with SGD or Adam,
// written as the kernel-by-kernel program PyTorch would run on a GPU.
//
// Model: `layers` Linear(hidden, hidden) + ReLU blocks on a `batch` x `hidden`
// input, MSE loss against a target of the same shape. Every tensor has the
// element size of `precision` (like model.half(): no fp32 master copy).
//
// Program, with every tensor allocated through the caching-allocator model:
//   setup      per layer: weight and bias, each written by an init kernel;
//              per parameter: optimizer state zeroed (Adam: exp_avg and
//              exp_avg_sq; SGD: momentum_buffer); then the input batch and
//              the target, each written by a load kernel.
//   iteration  kIterationBegin;
//              forward, per layer: gemm_fwd (x, W -> y), bias_relu_fwd
//              (y, b -> a), then y is freed (nothing saves it; ReLU saves a);
//              mse_loss_fwd (a_last, target -> loss);
//              backward: mse_loss_bwd (a_last, target -> grad a_last); per
//              layer in reverse: relu_bwd (grad a, a -> grad y), after which
//              grad a and the saved a are freed (their last use); bias_grad
//              (grad y -> bias.grad); gemm_dgrad (grad y, W -> grad x; not for
//              the first layer, whose input needs no gradient); gemm_wgrad
//              (grad y, x -> weight.grad); then grad y is freed;
//              optimizer step, one kernel per parameter, which reads param,
//              grad and state and writes param and state;
//              zero_grad(set_to_none=True) frees every .grad; the loss is
//              freed last.
// A kernel that updates a tensor in place reads it and then writes it, so it
// has two accesses to that tensor: the data must be valid before the write.
//
// The program is a stream: each Open() interprets a one-iteration template
// (workloads/tensor_program.h) kernel by kernel and holds only a handful of
// pending events.
#ifndef UMLAB_WORKLOADS_DNN_MLP_H_
#define UMLAB_WORKLOADS_DNN_MLP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/event_source.h"
#include "core/param_map.h"
#include "workloads/dnn/training_graph.h"
#include "workloads/tensor_program.h"
#include "workloads/workload.h"

namespace umlab {

struct MlpOptions {
  int layers = 8;
  int hidden = 2048;
  int batch = 1024;
  int iterations = 4;
  Precision precision = Precision::kFp32;
  Optimizer optimizer = Optimizer::kAdam;
};

// The parameters `mlp` declares; their defaults are MlpOptions{}.
std::vector<ParamInfo> MlpParams();

// Reads and range-checks resolved parameters.
absl::StatusOr<MlpOptions> MlpOptionsFromParams(const ParamMap& params);

// What one run of the program holds, measured by running it. "data" is the
// input batch and the target.
using MlpFootprint = ProgramFootprint;

class MlpWorkload : public Workload {
 public:
  // InvalidArgument when the options are out of range.
  static absl::StatusOr<std::unique_ptr<MlpWorkload>> Create(const MlpOptions& options,
                                                             const ComputeSpec& spec);
  ~MlpWorkload() override;

  std::unique_ptr<EventSource> Open() const override;
  std::string Describe() const override;

  // Runs the whole stream once and measures it (cost: one pass over the
  // events, a few thousand per iteration).
  absl::StatusOr<MlpFootprint> Footprint() const;

  const MlpOptions& options() const { return options_; }

 private:
  MlpWorkload(const MlpOptions& options, std::shared_ptr<const TensorProgram> program);

  MlpOptions options_;
  // Shared with every open stream, so a stream may outlive the workload.
  std::shared_ptr<const TensorProgram> program_;
};

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_MLP_H_
