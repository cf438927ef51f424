#include "workloads/dnn/cnn_layers.h"

#include "absl/strings/str_cat.h"
#include "workloads/dnn/dnn_workload.h"

namespace umlab {

int ConvBn(TrainingGraph& g, const std::string& conv_name, const std::string& bn_name,
           const ConvBnSpec& spec, int x, ImageShape& shape) {
  const ConvLayer conv = g.MakeConv(conv_name, shape.c, spec.out, spec.kernel, spec.stride,
                                    spec.kernel / 2, spec.groups, /*bias=*/false);
  const NormLayer bn = g.MakeBatchNorm(bn_name, spec.out);
  ImageShape out;
  x = g.Conv2d(conv, x, shape, &out);
  shape = out;
  x = g.BatchNorm2d(bn, x, shape);
  if (spec.relu && spec.relu6) {
    x = g.Relu6(x, bn_name + ".relu6", shape.elements());
  } else if (spec.relu) {
    x = g.Relu(x, bn_name + ".relu", shape.elements(), /*inplace=*/true);
  }
  return x;
}

int ClassifierLoss(TrainingGraph& g, const std::string& fc_name, int x,
                   const ImageShape& shape, uint64_t classes, int labels, double dropout) {
  x = g.GlobalAvgPool(x, "avgpool", shape);
  x = g.Dropout(x, fc_name + ".dropout", shape.n * shape.c, dropout);
  const LinearLayer fc = g.MakeLinear(fc_name, shape.c, classes, true);
  const int logits = g.Linear(fc, x, shape.n);
  return g.CrossEntropy(logits, labels, "loss", shape.n, classes);
}

std::vector<ParamInfo> ImageParams(int default_batch, Optimizer default_optimizer,
                                   int64_t min_image, const std::string& image_note) {
  std::vector<ParamInfo> params = TrainingParams(default_batch, 3, default_optimizer);
  params.push_back({"image", ParamType::kInt, "224",
                    absl::StrCat("image height and width in pixels", image_note),
                    ParamRange::Closed(min_image, 4096)});
  params.push_back(
      {"classes", ParamType::kInt, "1000", "classifier outputs", ParamRange::Closed(1, 1'000'000)});
  return params;
}

ImageBatch BeginImageBatch(TrainingGraph& g, int64_t image) {
  const uint64_t b = g.options().batch;
  ImageBatch batch;
  batch.shape = ImageShape{b, 3, static_cast<uint64_t>(image), static_cast<uint64_t>(image)};
  g.BeginIteration();
  batch.images = g.LoadInput("images", batch.shape.elements() * g.element_bytes());
  batch.labels = g.LoadInput("labels", b * 8);
  return batch;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeImageWorkload(const std::string& name,
                                                            const ParamMap& params,
                                                            const ComputeSpec& spec,
                                                            const ImageModelBuilder& build,
                                                            bool attention) {
  const TrainingOptions options = TrainingOptionsFromParams(params, attention);
  const int64_t image = params.Int("image");
  const int64_t classes = params.Int("classes");
  return MakeDnnWorkload(name, options, spec,
                         [&](TrainingGraph& g) { return build(g, image, classes); });
}

}  // namespace umlab
