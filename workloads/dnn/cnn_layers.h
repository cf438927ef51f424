// Convolution building blocks ResNet and MobileNet share: conv, batch norm
// and an optional in-place ReLU (torchvision's Conv2dNormActivation and the
// conv/bn/relu triples of its ResNet blocks), and the image/classes
// parameters and prologue every image classifier (ViT too) shares.
#ifndef UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_
#define UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/param_map.h"
#include "workloads/dnn/training_graph.h"
#include "workloads/workload.h"

namespace umlab {

struct ConvBnSpec {
  uint64_t out = 0, kernel = 1, stride = 1, groups = 1;
  bool relu = true;  // an activation after the norm
  // ReLU6 instead of ReLU(inplace=True): torchvision's Conv2dNormActivation
  // builds nn.ReLU6() without `inplace`, an out-of-place hardtanh whose
  // backward reads its input, so the norm's output stays alive as well.
  bool relu6 = false;
};

// conv (no bias, padding kernel/2) -> BatchNorm2d -> ReLU(inplace=True) or ReLU6.
// `conv_name` and `bn_name` are the module paths. Consumes x and updates
// `shape` to the output's.
int ConvBn(TrainingGraph& graph, const std::string& conv_name, const std::string& bn_name,
           const ConvBnSpec& spec, int x, ImageShape& shape);

// The ImageNet classifier tail: global average pool, Linear(C, classes), the
// cross-entropy loss against `labels`. Consumes x; returns the loss.
int ClassifierLoss(TrainingGraph& graph, const std::string& fc_name, int x,
                   const ImageShape& shape, uint64_t classes, int labels, double dropout);

// The image parameters every image classifier (ResNet, MobileNet, ViT)
// declares: the image size, `min_image` to 4096 pixels (the stem and pools of
// a CNN need a few pixels left; ViT one patch), with `image_note` appended to
// its description, and 1 to 1000000 classes.
std::vector<ParamInfo> ImageParams(int default_batch, Optimizer default_optimizer,
                                   int64_t min_image = 32, const std::string& image_note = "");

// A batch of image x image RGB images and their int64 labels, loaded at the
// start of an iteration.
struct ImageBatch {
  ImageShape shape;
  int images = -1;
  int labels = -1;
};
// BeginIteration, then the batch's images and labels loaded, in that order.
ImageBatch BeginImageBatch(TrainingGraph& graph, int64_t image);

// Writes one iteration of an image classifier on image x image pixels with
// `classes` outputs; returns the model's one-line summary.
using ImageModelBuilder = std::function<absl::StatusOr<std::string>(
    TrainingGraph& graph, int64_t image, int64_t classes)>;

// An image classifier's workload: reads the training options and what
// ImageParams declares (ParamRange checked their bounds), then builds it
// through MakeDnnWorkload.
absl::StatusOr<std::unique_ptr<Workload>> MakeImageWorkload(const std::string& name,
                                                            const ParamMap& params,
                                                            const ComputeSpec& spec,
                                                            const ImageModelBuilder& build,
                                                            bool attention = false);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_DNN_CNN_LAYERS_H_
