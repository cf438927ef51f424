// A DNN training workload: a TensorProgram built by a TrainingGraph, with
// the parameter count and footprint `umlab workloads --describe` prints.
// Every generator of the zoo (gpt2, bert, vit, resnet, mobilenet, dlrm)
// builds one through MakeDnnWorkload.
#ifndef UMLAB_WORKLOADS_DNN_DNN_WORKLOAD_H_
#define UMLAB_WORKLOADS_DNN_DNN_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "workloads/tensor_program.h"
#include "workloads/dnn/training_graph.h"
#include "workloads/workload.h"

namespace umlab {

class DnnWorkload : public Workload {
 public:
  DnnWorkload(std::string summary, uint64_t trainable_parameters, TrainingOptions options,
              std::shared_ptr<const TensorProgram> program);

  std::unique_ptr<EventSource> Open() const override;
  std::string Describe() const override;

  // Runs the whole stream once and measures it.
  absl::StatusOr<ProgramFootprint> Footprint() const { return MeasureFootprint(program_); }
  uint64_t trainable_parameters() const { return trainable_parameters_; }
  const TensorProgram& program() const { return *program_; }

 private:
  std::string summary_;
  uint64_t trainable_parameters_;
  TrainingOptions options_;
  std::shared_ptr<const TensorProgram> program_;
};

// Writes one iteration of the model into the graph: BeginIteration(), the
// forward pass, Backward(), Step(). Returns the one-line summary of the
// model for Describe().
using ModelBuilder = std::function<absl::StatusOr<std::string>(TrainingGraph& graph)>;

// Builds the program and checks it (no leaked tensor, a usable device spec).
absl::StatusOr<std::unique_ptr<Workload>> MakeDnnWorkload(const std::string& name,
                                                          const TrainingOptions& options,
                                                          const ComputeSpec& spec,
                                                          const ModelBuilder& build);

// Registers one workload per size of a model family (gpt2-small .. gpt2-xl),
// so that each size needs only its row: a Size has `name` and `description`;
// `params(size)` gives the parameters it declares and `make(size, params,
// spec)` builds it. `sizes` is a namespace-scope table: the factories keep a
// reference to their row. Returns whether every name was new.
template <typename Size, size_t N, typename ParamsFn, typename MakeFn>
bool RegisterModelFamily(const Size (&sizes)[N], ParamsFn params, MakeFn make) {
  bool registered = true;
  for (const Size& size : sizes) {
    registered &= Workloads().Register(
        {size.name, size.description, params(size),
         [&size, make](const ParamMap& p, const ComputeSpec& s) { return make(size, p, s); }});
  }
  return registered;
}

// UMLAB_REGISTER_WORKLOAD for a model family, from a source file's static
// initialisation: UMLAB_REGISTER_MODEL_FAMILY(gpt2, kSizes, Gpt2Params, MakeGpt2);
#define UMLAB_REGISTER_MODEL_FAMILY(id, ...)                          \
  [[maybe_unused]] static const bool umlab_workload_registered_##id = \
      ::umlab::RegisterModelFamily(__VA_ARGS__)

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_DNN_WORKLOAD_H_
