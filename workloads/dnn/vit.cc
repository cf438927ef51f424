// Vision Transformer training (torchvision vit_b_16 / vit_l_16 by default,
// timm's VisionTransformer with module=timm: the same parameters), sizes from
// Dosovitskiy et al. 2021 Table 1, patch 16:
//   ViT-B/16 12 layers, hidden  768, 12 heads, MLP 3072   (86.6 M parameters)
//   ViT-L/16 24 layers, hidden 1024, 16 heads, MLP 4096   (304 M)
// The 16x16/16 patch embedding is a Conv2d(3, C) with bias; a class token
// and learned position embeddings are added; pre-LayerNorm blocks with a
// fused qkv projection; a final LayerNorm and a Linear head on the class
// token. Neither library's defaults have dropout. torchvision's
// nn.MultiheadAttention(batch_first=True) adds layout copies around
// attention (layout_copies.cc); timm calls scaled_dot_product_attention on
// the qkv Linear's views.
#include "absl/strings/str_format.h"
#include "workloads/dnn/cnn_layers.h"
#include "workloads/dnn/dnn_workload.h"
#include "workloads/dnn/transformer_block.h"

namespace umlab {
namespace {

struct VitSize {
  const char* name;
  const char* description;
  int layers, hidden, heads, mlp;
};

constexpr uint64_t kPatch = 16;

constexpr VitSize kSizes[] = {
    {"vit-b", "ViT-B/16 (86 M) image-classification training", 12, 768, 12, 3072},
    {"vit-l", "ViT-L/16 (304 M) image-classification training", 24, 1024, 16, 4096},
};

std::vector<ParamInfo> VitParams(const VitSize&) {
  std::vector<ParamInfo> params =
      ImageParams(256, Optimizer::kAdam, kPatch, " (a multiple of the 16-pixel patch)");
  params.push_back(AttentionParamInfo());
  params.push_back({"module", ParamType::kString, "torchvision",
                    "whose attention module: torchvision (vit_b_16: nn.MultiheadAttention with "
                    "batch_first, and its layout copies) or timm (vit_base_patch16_224: a qkv "
                    "Linear straight into scaled_dot_product_attention)",
                    {},
                    {"torchvision", "timm"}});
  return params;
}

absl::StatusOr<std::unique_ptr<Workload>> MakeVit(const VitSize& size, const ParamMap& params,
                                                  const ComputeSpec& spec) {
  return MakeImageWorkload(size.name, params, spec,
                           [&](TrainingGraph& g, int64_t image,
                               int64_t classes) -> absl::StatusOr<std::string> {
    // The range is declared in VitParams; a multiple is not a range.
    if (image % kPatch != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "workload %s: image=%d must be a multiple of the %d-pixel patch", size.name, image,
          kPatch));
    }
    const uint64_t b = g.options().batch;
    const uint64_t c = size.hidden;
    const uint64_t side = static_cast<uint64_t>(image) / kPatch;
    const uint64_t patches = side * side;
    const uint64_t t = patches + 1;  // with the class token
    const uint64_t rows = b * t;
    const ConvLayer patch_embed =
        g.MakeConv("patch_embed.proj", 3, c, kPatch, kPatch, 0, 1, /*bias=*/true);
    const int cls = g.MakeParameter("cls_token", c);
    const int pos = g.MakeParameter("pos_embed", t * c);

    const auto [in, images, labels] = BeginImageBatch(g, image);
    ImageShape out;
    // flatten(2).transpose(1, 2) is a view; the cat with the class token copies.
    int x = g.Conv2d(patch_embed, images, in, &out);
    x = g.ClassTokenAndPosition(x, cls, pos, "embed", b, patches, c);

    TransformerShape shape{b, t, c, static_cast<uint64_t>(size.heads),
                           static_cast<uint64_t>(size.mlp),
                           /*pre_norm=*/true, /*fused_qkv=*/true, 0.0, 0.0};
    shape.torchvision_layout = params.String("module") == "torchvision";
    shape.packed_selects = shape.torchvision_layout;
    x = TransformerLayers(g, "blocks.", size.layers, shape, x);
    const NormLayer norm = g.MakeLayerNorm("norm", c);
    x = g.LayerNorm(norm, x, rows);
    // x[:, 0]: the class token's row of each sample, copied for the head.
    const int pooled = g.Concat({x}, {c}, "pool_cls", b);
    const LinearLayer head = g.MakeLinear("head", c, static_cast<uint64_t>(classes), true);
    const int logits = g.Linear(head, pooled, b);
    const int loss = g.CrossEntropy(logits, labels, "loss", b, static_cast<uint64_t>(classes));
    g.Backward(loss);
    g.Step();
    return absl::StrFormat(
        "%s image-classification training: %d layers, hidden %d, %d heads, MLP %d, "
        "%dx%d images in %d patches of 16x16, %d classes",
        size.name, size.layers, size.hidden, size.heads, size.mlp, image, image, patches,
        classes);
  }, /*attention=*/true);
}

}  // namespace

UMLAB_REGISTER_MODEL_FAMILY(vit, kSizes, VitParams, MakeVit);

}  // namespace umlab
