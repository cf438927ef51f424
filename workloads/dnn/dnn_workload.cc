#include "workloads/dnn/dnn_workload.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace umlab {

DnnWorkload::DnnWorkload(std::string summary, uint64_t trainable_parameters,
                         TrainingOptions options, std::shared_ptr<const TensorProgram> program)
    : summary_(std::move(summary)),
      trainable_parameters_(trainable_parameters),
      options_(options),
      program_(std::move(program)) {}

std::unique_ptr<EventSource> DnnWorkload::Open() const { return OpenTensorProgram(program_); }

std::string DnnWorkload::Describe() const {
  std::string text = absl::StrFormat(
      "%s: %s\n  batch %d, %s, %s, %d iterations\n  trainable parameters %s (%d)\n",
      program_->workload, summary_, options_.batch, PrecisionName(options_.precision),
      OptimizerName(options_.optimizer), options_.iterations,
      FormatParameterCount(trainable_parameters_), trainable_parameters_);
  absl::StatusOr<ProgramFootprint> f = Footprint();
  if (!f.ok()) return absl::StrCat(text, "  cannot run: ", f.status().message(), "\n");
  return text + DescribeFootprint(*f, options_.optimizer == Optimizer::kAdam
                                          ? "exp_avg, exp_avg_sq"
                                          : "momentum_buffer");
}

absl::StatusOr<std::unique_ptr<Workload>> MakeDnnWorkload(const std::string& name,
                                                          const TrainingOptions& options,
                                                          const ComputeSpec& spec,
                                                          const ModelBuilder& build) {
  if (!(spec.peak_flops_fp32 > 0) || !(spec.peak_flops_tensor > 0) ||
      !(spec.memory_bytes_per_second > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "workload %s: the device's peak FLOP rates and memory bandwidth must be "
        "positive to derive kernel times",
        name));
  }
  auto program = std::make_shared<TensorProgram>();
  program->workload = name;
  TrainingGraph graph(*program, spec, options);
  absl::StatusOr<std::string> summary = build(graph);
  if (!summary.ok()) return summary.status();
  if (absl::Status finished = graph.Finish(); !finished.ok()) return finished;
  if (!graph.builder().status().ok()) return graph.builder().status();
  return std::unique_ptr<Workload>(new DnnWorkload(
      *std::move(summary), graph.trainable_parameters(), options, std::move(program)));
}

}  // namespace umlab
