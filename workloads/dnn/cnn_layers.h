// Convolution building blocks ResNet and MobileNet share: conv, batch norm
// and an optional in-place ReLU (torchvision's Conv2dNormActivation and the
// conv/bn/relu triples of its ResNet blocks).
#ifndef UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_
#define UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_

#include <cstdint>
#include <string>

#include "workloads/dnn/training_graph.h"

namespace umlab {

struct ConvBnSpec {
  uint64_t out = 0, kernel = 1, stride = 1, groups = 1;
  bool relu = true;  // ReLU (or ReLU6: the same kernels) in place after the norm
};

// conv (no bias, padding kernel/2) -> BatchNorm2d -> ReLU(inplace=True).
// `conv_name` and `bn_name` are the module paths. Consumes x and updates
// `shape` to the output's.
int ConvBn(TrainingGraph& graph, const std::string& conv_name, const std::string& bn_name,
           const ConvBnSpec& spec, int x, ImageShape& shape);

// The ImageNet classifier tail: global average pool, Linear(C, classes), the
// cross-entropy loss against `labels`. Consumes x; returns the loss.
int ClassifierLoss(TrainingGraph& graph, const std::string& fc_name, int x,
                   const ImageShape& shape, uint64_t classes, int labels, double dropout);

// The image parameters every CNN generator declares: image size, classes.
std::vector<ParamInfo> ImageParams(int default_batch, Optimizer default_optimizer);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_
