#include "workloads/dnn/cnn_layers.h"

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
  if (spec.relu) x = g.Relu(x, bn_name + ".relu", shape.elements(), /*inplace=*/true);
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

std::vector<ParamInfo> ImageParams(int default_batch, Optimizer default_optimizer) {
  std::vector<ParamInfo> params = TrainingParams(default_batch, 3, default_optimizer);
  params.push_back({"image", ParamType::kInt, "224", "image height and width in pixels",
                    ParamRange::Closed(32, 4096)});
  params.push_back(
      {"classes", ParamType::kInt, "1000", "classifier outputs", ParamRange::Closed(1, 1'000'000)});
  return params;
}

}  // namespace umlab
