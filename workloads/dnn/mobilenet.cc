// MobileNetV2 training (torchvision mobilenet_v2; Sandler et al. 2018,
// Table 2): a 3x3/2 stem to 32 channels, 17 inverted-residual blocks
// (1x1 expand by t, 3x3 depthwise with the stride, 1x1 linear projection;
// a residual add when the stride is 1 and the width is unchanged), a 1x1
// conv to 1280, global pool, dropout 0.2 and a Linear head (3.5 M parameters
// at 1000 classes). ReLU6 runs in place, with ReLU's kernel shapes.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/dnn/cnn_layers.h"
#include "workloads/dnn/dnn_workload.h"

namespace umlab {
namespace {

// (expansion t, output channels c, repeats n, first stride s), Table 2.
constexpr int kSettings[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},
                                 {6, 64, 4, 2},  {6, 96, 3, 1},  {6, 160, 3, 2},
                                 {6, 320, 1, 1}};

absl::StatusOr<std::unique_ptr<Workload>> MakeMobilenet(const ParamMap& params,
                                                        const ComputeSpec& spec) {
  return MakeImageWorkload("mobilenet", params, spec,
                           [&](TrainingGraph& g, int64_t image,
                               int64_t classes) -> absl::StatusOr<std::string> {
    auto [shape, images, labels] = BeginImageBatch(g, image);
    int x = ConvBn(g, "features.0.0", "features.0.1", {32, 3, 2, 1, true, true}, images, shape);
    int index = 1;
    for (const auto& setting : kSettings) {
      const uint64_t t = setting[0], c = setting[1];
      for (int i = 0; i < setting[2]; ++i, ++index) {
        const uint64_t stride = i == 0 ? setting[3] : 1;
        const std::string p = absl::StrCat("features.", index, ".conv");
        const uint64_t hidden = shape.c * t;
        const bool residual = stride == 1 && shape.c == c;
        if (residual) g.Retain(x);
        int out = x;
        int layer = 0;
        if (t != 1) {
          out = ConvBn(g, absl::StrCat(p, ".", layer, ".0"), absl::StrCat(p, ".", layer, ".1"),
                       {hidden, 1, 1, 1, true, true}, out, shape);
          ++layer;
        }
        out = ConvBn(g, absl::StrCat(p, ".", layer, ".0"), absl::StrCat(p, ".", layer, ".1"),
                     {hidden, 3, stride, hidden, true, true}, out, shape);
        ++layer;
        out = ConvBn(g, absl::StrCat(p, ".", layer), absl::StrCat(p, ".", layer + 1),
                     {c, 1, 1, 1, false}, out, shape);
        x = residual ? g.Add(x, out, absl::StrCat("features.", index, ".residual"),
                             shape.elements())
                     : out;
      }
    }
    x = ConvBn(g, absl::StrCat("features.", index, ".0"), absl::StrCat("features.", index, ".1"),
               {1280, 1, 1, 1, true, true}, x, shape);
    const int loss = ClassifierLoss(g, "classifier.1", x, shape, static_cast<uint64_t>(classes),
                                    labels, 0.2);
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "MobileNetV2 image-classification training: 17 inverted-residual blocks, %dx%d "
        "images, %d classes",
        image, image, classes);
  });
}

}  // namespace

UMLAB_REGISTER_WORKLOAD(mobilenet, {"mobilenet", "MobileNetV2 (3.5 M) image-classification training",
                                    ImageParams(256, Optimizer::kSgd), MakeMobilenet});

}  // namespace umlab
