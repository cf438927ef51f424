// ResNet training (torchvision resnet50/152/200 layout; He et al. 2016,
// Table 1): a 7x7/2 stem conv, BN, ReLU, 3x3/2 max pool, then four stages of
// Bottleneck blocks (1x1 -> 3x3 (stride here, as torchvision's "v1.5") ->
// 1x1 with 4x expansion, BN after each conv, `out += identity` in place, then
// ReLU in place), global average pool and a 1000-way Linear.
//   resnet50  [3, 4, 6, 3]   (25.6 M parameters)
//   resnet152 [3, 8, 36, 3]  (60.2 M)
//   resnet200 [3, 24, 36, 3] (64.7 M)
// Trained with SGD and momentum, as in PyTorch's ImageNet example.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/cnn_layers.h"
#include "workloads/dnn/dnn_workload.h"

namespace umlab {
namespace {

struct ResnetDepth {
  const char* name;
  const char* description;
  int default_batch;
  int blocks[4];
};

// Default batches: DeepUM's smallest (ResNet-152 1280, ResNet-200 1024).
constexpr ResnetDepth kDepths[] = {
    {"resnet50", "ResNet-50 (25.6 M) ImageNet training", 256, {3, 4, 6, 3}},
    {"resnet152", "ResNet-152 (60.2 M) ImageNet training", 1280, {3, 8, 36, 3}},
    {"resnet200", "ResNet-200 (64.7 M) ImageNet training", 1024, {3, 24, 36, 3}},
};

std::vector<ParamInfo> ResnetParams(const ResnetDepth& depth) {
  return ImageParams(depth.default_batch, Optimizer::kSgd);
}

absl::StatusOr<std::unique_ptr<Workload>> MakeResnet(const ResnetDepth& depth,
                                                     const ParamMap& params,
                                                     const ComputeSpec& spec) {
  return MakeImageWorkload(depth.name, params, spec,
                           [&](TrainingGraph& g, int64_t image,
                               int64_t classes) -> absl::StatusOr<std::string> {
    auto [shape, images, labels] = BeginImageBatch(g, image);
    int x = ConvBn(g, "conv1", "bn1", {64, 7, 2, 1, true}, images, shape);
    ImageShape pooled;
    x = g.MaxPool2d(x, "maxpool", shape, 3, 2, 1, &pooled);
    shape = pooled;
    for (int stage = 0; stage < 4; ++stage) {
      const uint64_t width = 64ull << stage;
      for (int block = 0; block < depth.blocks[stage]; ++block) {
        const std::string p = absl::StrCat("layer", stage + 1, ".", block);
        const uint64_t stride = (stage > 0 && block == 0) ? 2 : 1;
        const bool downsample = block == 0;  // stride 2, or 64 -> 256 channels
        ImageShape identity_shape = shape;
        g.Retain(x);  // the identity branch
        int out = ConvBn(g, p + ".conv1", p + ".bn1", {width, 1, 1, 1, true}, x, shape);
        out = ConvBn(g, p + ".conv2", p + ".bn2", {width, 3, stride, 1, true}, out, shape);
        out = ConvBn(g, p + ".conv3", p + ".bn3", {4 * width, 1, 1, 1, false}, out, shape);
        int identity = x;
        if (downsample) {
          identity = ConvBn(g, p + ".downsample.0", p + ".downsample.1",
                            {4 * width, 1, stride, 1, false}, x, identity_shape);
        }
        out = g.AddInPlace(out, identity, p + ".residual", shape.elements());
        x = g.Relu(out, p + ".relu", shape.elements(), /*inplace=*/true);
      }
    }
    const int loss = ClassifierLoss(g, "fc", x, shape, static_cast<uint64_t>(classes), labels,
                                    0.0);
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "ResNet image-classification training: bottleneck blocks [%d, %d, %d, %d], "
        "%dx%d images, %d classes",
        depth.blocks[0], depth.blocks[1], depth.blocks[2], depth.blocks[3], image, image,
        classes);
  });
}

}  // namespace

UMLAB_REGISTER_MODEL_FAMILY(resnet, kDepths, ResnetParams, MakeResnet);

}  // namespace umlab
