#include "workloads/g10/g10_workload.h"

#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "core/tensor_role.h"
#include "workloads/kernel_emitter.h"
#include "workloads/workload.h"

namespace umlab {

namespace {

constexpr uint64_t kSegmentAlign = uint64_t{2} << 20;

// Per-kernel lifetime edges of the intermediates, computed once per model.
struct G10Schedule {
  std::shared_ptr<const G10Model> model;
  uint64_t segment_bytes = 0;
  std::vector<std::vector<int>> activate_before;  // per kernel
  std::vector<std::vector<int>> deactivate_after;  // per kernel
};

std::shared_ptr<const G10Schedule> MakeSchedule(std::shared_ptr<const G10Model> model) {
  auto schedule = std::make_shared<G10Schedule>();
  const size_t kernels = model->kernels.size();
  const uint64_t total = model->global_bytes + model->intermediate_bytes;
  schedule->segment_bytes = (total + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign;
  schedule->activate_before.resize(kernels);
  schedule->deactivate_after.resize(kernels);
  std::vector<int> first(model->tensors.size(), -1), last(model->tensors.size(), -1);
  for (size_t k = 0; k < kernels; ++k) {
    const G10Kernel& kernel = model->kernels[k];
    for (const std::vector<int>* list : {&kernel.inputs, &kernel.outputs}) {
      for (int t : *list) {
        if (first[t] < 0) first[t] = static_cast<int>(k);
        last[t] = static_cast<int>(k);
      }
    }
  }
  for (size_t t = 0; t < model->tensors.size(); ++t) {
    // Weights live across iterations; tensors no kernel touches never need memory.
    if (model->tensors[t].global || first[t] < 0) continue;
    schedule->activate_before[first[t]].push_back(static_cast<int>(t));
    schedule->deactivate_after[last[t]].push_back(static_cast<int>(t));
  }
  schedule->model = std::move(model);
  return schedule;
}

class G10EventSource : public EventSource {
 public:
  G10EventSource(std::shared_ptr<const G10Schedule> schedule, int iterations)
      : schedule_(std::move(schedule)), iterations_(iterations) {}

  bool Next(Event& event) override {
    while (pending_.empty()) {
      if (!Refill()) return false;
    }
    event = std::move(pending_.front());
    pending_.pop_front();
    return true;
  }

 private:
  const G10Model& model() const { return *schedule_->model; }

  void Range(EventKind kind, const G10Tensor& tensor) {
    Event event;
    event.kind = kind;
    event.address = kG10DeviceBase + tensor.offset;
    event.size = tensor.bytes;
    // G10's graphs tell weights from intermediates, and no more (its
    // gradients and activations are all intermediates).
    if (kind == EventKind::kActivate && tensor.global) {
      event.cause = ActivateCause(TensorRole::kParameter);
    }
    pending_.push_back(std::move(event));
  }

  void Segment(EventKind kind) {
    Event event;
    event.kind = kind;
    event.address = kG10DeviceBase;
    event.size = schedule_->segment_bytes;
    pending_.push_back(std::move(event));
  }

  // Queues the next group of events; false at the end.
  bool Refill() {
    switch (stage_) {
      case Stage::kSetup:
        Segment(EventKind::kAlloc);
        for (const G10Tensor& tensor : model().tensors) {
          if (tensor.global) Range(EventKind::kActivate, tensor);
        }
        stage_ = iterations_ > 0 ? Stage::kIterationBegin : Stage::kTeardown;
        return true;
      case Stage::kIterationBegin: {
        Event event;
        event.kind = EventKind::kIterationBegin;
        event.iteration = static_cast<uint64_t>(iteration_);
        pending_.push_back(std::move(event));
        kernel_ = 0;
        stage_ = model().kernels.empty() ? Stage::kIterationEnd : Stage::kKernel;
        return true;
      }
      case Stage::kKernel:
        Launch(kernel_);
        if (++kernel_ == model().kernels.size()) stage_ = Stage::kIterationEnd;
        return true;
      case Stage::kIterationEnd:
        stage_ = ++iteration_ < iterations_ ? Stage::kIterationBegin : Stage::kTeardown;
        return true;
      case Stage::kTeardown:
        for (const G10Tensor& tensor : model().tensors) {
          if (tensor.global) Range(EventKind::kDeactivate, tensor);
        }
        Segment(EventKind::kFree);
        stage_ = Stage::kDone;
        return true;
      case Stage::kDone:
        return false;
    }
    return false;
  }

  void Launch(size_t k) {
    const G10Kernel& kernel = model().kernels[k];
    for (int t : schedule_->activate_before[k]) Range(EventKind::kActivate, model().tensors[t]);
    // Execution ids start at 1, one per G10 kernel id, the same every iteration.
    const uint32_t exec_id = static_cast<uint32_t>(k) + 1;
    if (iteration_ == 0) {
      // The A100 times with faults, for the sim's G10 fault model.
      Event times;
      times.kind = EventKind::kKernelFaultTimes;
      times.exec_id = exec_id;
      times.duration_ns = kernel.pf_ns;
      times.time_ns = kernel.input_pf_ns;
      pending_.push_back(std::move(times));
    }
    KernelEmitter emitter(pending_, exec_id, kernel.ideal_ns,
                          iteration_ == 0 ? &kernel.name : nullptr);
    for (int t : kernel.inputs) {
      const G10Tensor& tensor = model().tensors[t];
      emitter.Access(AccessType::kRead, kG10DeviceBase + tensor.offset, tensor.bytes);
    }
    for (int t : kernel.outputs) {
      const G10Tensor& tensor = model().tensors[t];
      emitter.Access(AccessType::kWrite, kG10DeviceBase + tensor.offset, tensor.bytes);
    }
    emitter.End();
    for (int t : schedule_->deactivate_after[k]) Range(EventKind::kDeactivate, model().tensors[t]);
  }

  enum class Stage { kSetup, kIterationBegin, kKernel, kIterationEnd, kTeardown, kDone };

  std::shared_ptr<const G10Schedule> schedule_;
  const int iterations_;
  Stage stage_ = Stage::kSetup;
  int iteration_ = 0;
  size_t kernel_ = 0;
  std::deque<Event> pending_;
};

class G10Workload : public Workload {
 public:
  G10Workload(std::shared_ptr<const G10Schedule> schedule, int iterations)
      : schedule_(std::move(schedule)), iterations_(iterations) {}

  std::unique_ptr<EventSource> Open() const override {
    return std::make_unique<G10EventSource>(schedule_, iterations_);
  }

  std::string Describe() const override { return DescribeG10Model(*schedule_->model); }

 private:
  std::shared_ptr<const G10Schedule> schedule_;
  int iterations_;
};

absl::StatusOr<std::unique_ptr<Workload>> MakeG10(const ParamMap& params, const ComputeSpec&) {
  const int64_t batch = params.Int("batch");
  const int64_t iterations = params.Int("iterations");
  const int64_t border = params.Int("border");
  absl::StatusOr<G10Model> model =
      LoadG10Model(params.String("dir"), params.String("model"), static_cast<int>(batch),
                   static_cast<int>(border));
  if (!model.ok()) return model.status();
  return std::make_unique<G10Workload>(
      MakeSchedule(std::make_shared<const G10Model>(*std::move(model))),
      static_cast<int>(iterations));
}

}  // namespace

std::unique_ptr<EventSource> OpenG10Program(std::shared_ptr<const G10Model> model,
                                            int iterations) {
  return std::make_unique<G10EventSource>(MakeSchedule(std::move(model)), iterations);
}

std::string DescribeG10Model(const G10Model& model) {
  Nanos ideal = 0;
  for (const G10Kernel& kernel : model.kernels) ideal += kernel.ideal_ns;
  int globals = 0;
  for (const G10Tensor& tensor : model.tensors) globals += tensor.global ? 1 : 0;
  const int kernels = static_cast<int>(model.kernels.size());
  return absl::StrFormat(
      "g10 %s, batch %d (G10's published graph and A100 kernel times)\n"
      "  tensors: %d (%d global, %d workspace)\n"
      "  kernels per iteration: %d (%d forward, 1 loss, %d backward)\n"
      "  global bytes: %s\n  intermediate bytes: %s\n  ideal iteration time: %.3f ms\n",
      model.model, model.batch, model.tensors.size(), globals, model.workspace_tensors,
      kernels, model.forward_kernels, kernels - model.forward_kernels - 1,
      FormatBytes(model.global_bytes), FormatBytes(model.intermediate_bytes),
      static_cast<double>(ideal) / 1e6);
}

UMLAB_REGISTER_WORKLOAD(
    g10, {"g10",
          "a G10 (MICRO'23) training iteration from its published graph and A100 kernel "
          "times; static layout (transformer graphs such as BERT_Base at batch 256, CNN graphs "
          "such as ResNet152 at batch 1280)",
          {{"model", ParamType::kString, "BERT_Base", "G10 model name (frontend/Nets/NAME.txt)"},
           {"batch", ParamType::kInt, "256", "batch size; G10 must ship cudnn<B>*.txt for it",
            ParamRange::Closed(1, 1 << 20)},
           {"dir", ParamType::kString, kDefaultG10Dir,
            "G10 data directory (frontend/, results/); the default is the samples umlab "
            "ships in data/g10 (BERT_Base at 256, ResNet152 at 1280)"},
           {"iterations", ParamType::kInt, "2", "training iterations",
            ParamRange::Closed(1, 1'000'000)},
           {"border", ParamType::kInt, "0",
            "transformer graphs: ids below it are global; 0: G10's value for the model (BERT "
            "210, ViT 184). CNN graphs take none: their weights are global",
            ParamRange::Closed(0, 1 << 30)}},
          MakeG10});

}  // namespace umlab
