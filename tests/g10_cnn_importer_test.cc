// The G10 importer on CNN graphs (PyTorch print text): the ResNet152 fixture
// at batch 1280 against data/g10/FORMAT.md and G10's source
// (platformxlab/G10 src/ast.cc, src/analysis.cc), G10's block wiring on small
// hand-checked nets, Inception-v3 and SENet-154 against the kernel counts of
// G10's shipped per-kernel files, and one-line input errors.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "tests/g10_fixture.h"
#include "workloads/g10/g10_cnn_graph.h"
#include "workloads/g10/g10_graph.h"

namespace umlab {
namespace {

using g10_test::CopyFixture;
using g10_test::ReadAll;
using g10_test::Sizes;
using g10_test::SmallBatchDir;
using g10_test::Whats;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string& kFixture = g10_test::FixtureDir();

const G10Model& ResNet() {
  static const G10Model* model = [] {
    absl::StatusOr<G10Model> loaded = LoadG10Model(kFixture, "ResNet152", 1280);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new G10Model(loaded.ok() ? *std::move(loaded) : G10Model());
  }();
  return *model;
}

int CountKernels(const G10Model& model, const std::string& name) {
  return static_cast<int>(std::count_if(model.kernels.begin(), model.kernels.end(),
                                         [&](const G10Kernel& k) { return k.name == name; }));
}

int CountGlobals(const G10Model& model) {
  return static_cast<int>(std::count_if(model.tensors.begin(), model.tensors.end(),
                                        [](const G10Tensor& t) { return t.global; }));
}

// The first kernel of that name whose inputs or outputs include a tensor
// described as `what`; nullptr if none.
const G10Kernel* FindKernel(const G10Model& model, const std::string& name,
                            const std::string& what) {
  for (const G10Kernel& kernel : model.kernels) {
    if (kernel.name != name) continue;
    for (const std::vector<int>* list : {&kernel.inputs, &kernel.outputs}) {
      for (int t : *list) {
        if (model.tensors[t].what == what) return &kernel;
      }
    }
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// ResNet152 at batch 1280 (the fixture).

TEST(G10CnnImporter, ResNet152ReproducesFormatMdChecks) {
  const G10Model& model = ResNet();
  EXPECT_EQ(model.kind, G10GraphKind::kCnn);
  EXPECT_EQ(model.border, 0);
  EXPECT_EQ(model.input_size, 224);
  ASSERT_EQ(model.kernels.size(), 1299u);
  int with_workspace = 0;
  for (const G10Kernel& kernel : model.kernels) with_workspace += kernel.workspace_raw_bytes > 0;
  EXPECT_EQ(with_workspace, 427);
  EXPECT_EQ(model.workspace_tensors, 427);

  // Kernel 0, LoadData_A0, writes the 770,703,360 B input (1280x3x224x224x4).
  const G10Kernel& k0 = model.kernels[0];
  EXPECT_EQ(k0.name, "LoadData_A0");
  EXPECT_TRUE(k0.inputs.empty());
  ASSERT_EQ(k0.outputs.size(), 1u);
  const int input = k0.outputs[0];
  EXPECT_EQ(model.tensors[input].raw_bytes, 770'703'360u);
  EXPECT_EQ(model.tensors[input].bytes, 770'703'360u);
  EXPECT_FALSE(model.tensors[input].global);

  // Kernel 1, Conv2d_Forward, reads the input and a 40,960 B weight
  // (64x3x7x7x4 = 37,632 B, page-rounded). It writes 4,110,417,920 B
  // (1280x64x112x112x4) plus a 114,688 B workspace (114,048 B before
  // rounding, line 1 of cudnn1280Workspace.txt).
  const G10Kernel& k1 = model.kernels[1];
  EXPECT_EQ(k1.name, "Conv2d_Forward");
  ASSERT_EQ(k1.inputs.size(), 2u);
  EXPECT_EQ(k1.inputs[0], input);
  EXPECT_EQ(model.tensors[k1.inputs[1]].bytes, 40'960u);
  EXPECT_EQ(model.tensors[k1.inputs[1]].raw_bytes, 37'632u);
  EXPECT_TRUE(model.tensors[k1.inputs[1]].global);
  EXPECT_THAT(Sizes(model, k1.outputs), ElementsAre(4'110'417'920u, 114'688u));
  EXPECT_EQ(k1.workspace_raw_bytes, 114'048u);
  EXPECT_EQ(model.tensors[k1.outputs[1]].raw_bytes, 114'048u);
}

// Derived from G10's rules (src/analysis.cc, layer_first_pass_dataflow and
// main.cc's loadWorkspaceSizes), counting ResNet152's 414 layers: 155 Conv2d
// (1 stem + 3 per Bottleneck x 50 + 4 downsample), 155 BatchNorm2d, 51
// in-place ReLU (1 stem + 1 per Bottleneck; G10 keeps a Bottleneck's single
// printed relu once, before the Add), 1 MaxPool2d, 1 AdaptiveAvgPool2d, 1
// Linear with bias, and the 50 Add layers G10 inserts, one per Bottleneck.
//  - Tensors: a Conv2d makes output, weight, weight gradient and input
//    gradient (4; the first also the input images: 155 x 4 + 1 = 621); a
//    BatchNorm2d 14 (output, input gradient, scale+shift and its gradient,
//    mean, var, v1, v2 and their 4 gradients, running mean and variance:
//    2170); an in-place ReLU only its input gradient (51); a pool output and
//    input gradient (4); the Linear weight, output, input gradient, weight
//    gradient, bias and its gradient (6); an Add its output (50); plus the
//    loss gradient (1): 2903. Then one tensor per non-zero line of
//    cudnn1280Workspace.txt: 427. Total 3330.
//  - Globals: the 155 conv weights, 3 per BatchNorm2d (scale+shift, running
//    mean, running variance: 465), the Linear weight and bias: 622 tensors.
//    Their page-rounded sizes sum to 242,307,072 B.
//  - Intermediates: everything else at 4 x N x C x H x W with N = 1280 and
//    shapes propagated from 224x224, page-rounded, plus the 427 workspaces
//    (330,057,424,896 B rounded): 1,166,032,891,904 B in all.
// The sums were computed independently of the importer, by a script that
// walks ResNet152.txt with the same rules.
// Kernels: LoadData_A0 + 414 forward, makeLoss, then per layer in reverse:
// Conv2d 3 (155 x 3), BatchNorm2d 2 (310), ReLU and pools 1 (53), Linear 5,
// Add none, and an Add_MultiGredient for each of the 50 layers that feed two
// (a Bottleneck's input): 415 + 1 + 883 = 1299.
TEST(G10CnnImporter, ResNet152CountsFollowG10Rules) {
  const G10Model& model = ResNet();
  EXPECT_EQ(model.tensors.size(), 3330u);
  EXPECT_EQ(model.tensors.size() - model.workspace_tensors, 2903u);
  EXPECT_EQ(CountGlobals(model), 622);
  EXPECT_EQ(model.global_bytes, 242'307'072u);
  EXPECT_EQ(model.intermediate_bytes, 1'166'032'891'904u);
  ASSERT_EQ(model.kernels.size(), 1299u);
  EXPECT_EQ(model.forward_kernels, 415);
  EXPECT_EQ(model.kernels[415].name, "makeLoss");
  EXPECT_EQ(CountKernels(model, "Conv2d_Forward"), 155);
  EXPECT_EQ(CountKernels(model, "BatchNorm2d_Forward"), 155);
  EXPECT_EQ(CountKernels(model, "Add_Forward"), 50);
  EXPECT_EQ(CountKernels(model, "Add_MultiGredient"), 50);
  EXPECT_EQ(CountKernels(model, "Conv2d_Apply_Grad"), 155);
  // The fc layer's backward kernels, in G10's order, then the pool's.
  std::vector<std::string> names;
  for (int k = 416; k < 422; ++k) names.push_back(model.kernels[k].name);
  EXPECT_THAT(names, ElementsAre("Linear_Backward_Bias", "Linear_Apply_Grad_Bias",
                                 "Linear_Backward_Weight", "Linear_Backward_Input",
                                 "Linear_Apply_Grad_Weight", "AdaptiveAvgPool2d_Backward"));
  EXPECT_EQ(model.kernels.back().name, "Conv2d_Apply_Grad");
  g10_test::ExpectPackedLayout(model);
}

TEST(G10CnnImporter, ResNet152WorkspacesFallOnConvolutions) {
  // cuDNN workspaces belong to convolution kernels only; that every
  // non-zero line of cudnn1280Workspace.txt lands on one checks that the
  // kernel ids line up with G10's.
  const G10Model& model = ResNet();
  for (size_t k = 0; k < model.kernels.size(); ++k) {
    const G10Kernel& kernel = model.kernels[k];
    if (kernel.workspace_raw_bytes == 0) continue;
    EXPECT_THAT(kernel.name, ::testing::AnyOf("Conv2d_Forward", "Conv2d_Backward_Weight",
                                              "Conv2d_Backward_Input"))
        << k;
  }
}

TEST(G10CnnImporter, ResNet152TimesAreTheMeasuredOnes) {
  const G10Model& model = ResNet();
  // Sampled lines of cudnn1280.txt.
  EXPECT_EQ(model.kernels[0].ideal_ns, 277'998'344);    // 0000 277.998344 ms
  EXPECT_EQ(model.kernels[1].ideal_ns, 630'461'425);    // 0001 630.461425 ms
  EXPECT_EQ(model.kernels[1].input_pf_ns, 1'091'232'270);  // cudnn1280InputPF.txt
  EXPECT_EQ(model.kernels[415].ideal_ns, 4'608);        // 0415 0.004608 ms (makeLoss)
  EXPECT_EQ(model.kernels[1297].ideal_ns, 668'771'332);  // 1297 668.771332 ms
  EXPECT_EQ(model.kernels[1298].ideal_ns, 11'776);      // 1298 0.011776 ms
  // Every line, and their sum (G10's ideal iteration time).
  const double total_ms = g10_test::ExpectTimesAreTheFile(
      model, kFixture + "/results/ResNet152/cudnn1280.txt");
  EXPECT_NEAR(total_ms, 112'589.384547, 0.001);
}

TEST(G10CnnImporter, ResNet152BottlenecksAreWiredAsInG10) {
  const G10Model& model = ResNet();
  // With a downsample: the Add joins the main path's relu (in place on bn3's
  // output) and the downsample's BatchNorm; the downsample conv reads the
  // block's input.
  const G10Kernel* add = FindKernel(model, "Add_Forward", "layer1.0.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(model, add->inputs),
              ElementsAre("layer1.0.bn3 output", "layer1.0.downsample.1 output"));
  const G10Kernel* downsample =
      FindKernel(model, "Conv2d_Forward", "layer1.0.downsample.0 output");
  ASSERT_NE(downsample, nullptr);
  EXPECT_THAT(Whats(model, downsample->inputs),
              ElementsAre("maxpool output", "layer1.0.downsample.0 weight"));
  // Without: the Add joins the block's input (the previous Add) and the
  // main path.
  add = FindKernel(model, "Add_Forward", "layer1.1.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(model, add->inputs), ElementsAre("layer1.0.add output", "layer1.1.bn3 output"));
  // A block's input feeds two layers: its gradients are summed first.
  const G10Kernel* sum =
      FindKernel(model, "Add_MultiGredient", "layer1.1.conv1 input gradient");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(model.tensors[sum->outputs.at(0)].what, "layer1.1.conv1 input gradient");
  EXPECT_EQ(sum->inputs.size(), 2u);
}

// ---------------------------------------------------------------------------
// Small nets in G10's print format.

// Builds PyTorch print text, indented as the frontend/Nets files are.
class NetText {
 public:
  explicit NetText(const std::string& model) : text_(model + "(\n") {}

  NetText& Open(const std::string& label, const std::string& type) {
    Line(absl::StrCat("(", label, "): ", type, "("));
    ++depth_;
    return *this;
  }
  NetText& Close() {
    --depth_;
    Line(")");
    return *this;
  }
  NetText& Op(const std::string& label, const std::string& op) {
    Line(absl::StrCat("(", label, "): ", op));
    return *this;
  }
  NetText& Conv(const std::string& label, int in, int out, int kh, int kw, int stride, int ph,
                int pw) {
    const std::string padding =
        ph == 0 && pw == 0 ? "" : absl::StrFormat(", padding=(%d, %d)", ph, pw);
    return Op(label, absl::StrFormat("Conv2d(%d, %d, kernel_size=(%d, %d), stride=(%d, %d)%s, "
                                     "bias=False)",
                                     in, out, kh, kw, stride, stride, padding));
  }
  NetText& Conv(const std::string& label, int in, int out, int k, int stride = 1, int pad = 0) {
    return Conv(label, in, out, k, k, stride, pad, pad);
  }
  NetText& Bn(const std::string& label, int channels) {
    return Op(label, absl::StrFormat("BatchNorm2d(%d, eps=1e-05, momentum=0.1, affine=True, "
                                     "track_running_stats=True)",
                                     channels));
  }
  NetText& Relu(const std::string& label) { return Op(label, "ReLU(inplace=True)"); }
  NetText& MaxPool(const std::string& label, int k, int stride, int pad) {
    return Op(label, absl::StrFormat("MaxPool2d(kernel_size=%d, stride=%d, padding=%d, "
                                     "dilation=1, ceil_mode=False)",
                                     k, stride, pad));
  }
  NetText& Head(int features, double dropout) {
    Op("avgpool", "AdaptiveAvgPool2d(output_size=(1, 1))");
    if (dropout > 0) Op("dropout", absl::StrFormat("Dropout(p=%g, inplace=False)", dropout));
    return Op("fc", absl::StrFormat("Linear(in_features=%d, out_features=1000, bias=True)",
                                    features));
  }
  std::string Done() const { return text_ + ")\n"; }

 private:
  void Line(const std::string& line) { text_ += std::string(2 * depth_, ' ') + line + "\n"; }

  std::string text_;
  int depth_ = 1;
};

// A ResNet-18-style stem and two BasicBlocks, the first with a downsample.
std::string TwoBasicBlocks() {
  NetText net("ResNet");
  net.Conv("conv1", 3, 4, 3, 1, 1).Open("layer1", "Sequential");
  net.Open("0", "BasicBlock").Conv("conv1", 4, 8, 3, 2, 1).Bn("bn1", 8).Relu("relu");
  net.Conv("conv2", 8, 8, 3, 1, 1).Bn("bn2", 8).Open("downsample", "Sequential");
  net.Conv("0", 4, 8, 1, 2).Bn("1", 8).Close().Close();
  net.Open("1", "BasicBlock").Conv("conv1", 8, 8, 3, 1, 1).Bn("bn1", 8).Relu("relu");
  net.Conv("conv2", 8, 8, 3, 1, 1).Bn("bn2", 8).Close();
  net.Close().Op("avgpool", "AdaptiveAvgPool2d(output_size=(1, 1))");
  return net.Op("fc", "Linear(in_features=8, out_features=10, bias=True)").Done();
}

TEST(G10CnnImporter, BasicBlocksWithAndWithoutDownsample) {
  absl::StatusOr<G10Model> model = ParseG10CnnGraph(TwoBasicBlocks(), "net.txt", 2, 8);
  ASSERT_TRUE(model.ok()) << model.status();
  // 17 layers: conv1; block 0: conv1 bn1 relu conv2 bn2 downsample.0
  // downsample.1 add; block 1: conv1 bn1 relu conv2 bn2 add; avgpool; fc.
  // Kernels: LoadData_A0 + 17, makeLoss, then backward (fc 5, avgpool 1,
  // BatchNorm 2 x 5, conv 3 x 6, ReLU 1 x 2, and Add_MultiGredient for
  // block 0's Add and for conv1, which feed two layers each): 18 + 1 + 38.
  EXPECT_EQ(model->forward_kernels, 18);
  EXPECT_EQ(model->kernels.size(), 57u);
  // Tensors: conv 4 x 6 + the images, BatchNorm 14 x 5, ReLU 1 x 2, Add
  // 1 x 2, avgpool 2, Linear 6, loss gradient 1.
  EXPECT_EQ(model->tensors.size(), 108u);
  EXPECT_EQ(CountGlobals(*model), 6 + 3 * 5 + 2);

  // Block 0 (downsample): the Add joins bn2 and the downsample's bn; the
  // downsample conv reads the block's input.
  const G10Kernel* add = FindKernel(*model, "Add_Forward", "layer1.0.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(*model, add->inputs),
              ElementsAre("layer1.0.bn2 output", "layer1.0.downsample.1 output"));
  const G10Kernel* downsample =
      FindKernel(*model, "Conv2d_Forward", "layer1.0.downsample.0 output");
  ASSERT_NE(downsample, nullptr);
  EXPECT_EQ(model->tensors[downsample->inputs.at(0)].what, "conv1 output");
  // Block 1 (plain): the Add joins the block's input, then bn2.
  add = FindKernel(*model, "Add_Forward", "layer1.1.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(*model, add->inputs),
              ElementsAre("layer1.0.add output", "layer1.1.bn2 output"));
  // Gradient fan-in: block 0's Add feeds block 1's conv1 and Add. Its output
  // gradient is the first consumer's input gradient; an Add consumer passes
  // its own output gradient (here avgpool's input gradient).
  const G10Kernel* sum =
      FindKernel(*model, "Add_MultiGredient", "layer1.1.conv1 input gradient");
  ASSERT_NE(sum, nullptr);
  EXPECT_THAT(Whats(*model, sum->inputs),
              ElementsAre("layer1.1.conv1 input gradient", "avgpool input gradient"));
  sum = FindKernel(*model, "Add_MultiGredient", "layer1.0.conv1 input gradient");
  ASSERT_NE(sum, nullptr);
  EXPECT_THAT(Whats(*model, sum->inputs),
              ElementsAre("layer1.0.conv1 input gradient", "layer1.0.downsample.0 input gradient"));
  // Shapes: 8x8 input, stride 2 in block 0: the Add outputs 2x8x4x4 floats.
  EXPECT_EQ(model->tensors[add->outputs.at(0)].raw_bytes, 4u * 2 * 8 * 4 * 4);
}

// Inception-v3 as in G10's frontend/Nets/Inceptionv3.txt (torchvision's
// Inception3 printed with a relu entry in each BasicConv2d).
std::string InceptionV3() {
  NetText net("Inception3");
  auto basic = [&](const std::string& label, int in, int out, int kh, int kw, int stride, int ph,
                   int pw) {
    net.Open(label, "BasicConv2d").Conv("conv", in, out, kh, kw, stride, ph, pw);
    net.Op("bn", absl::StrFormat("BatchNorm2d(%d, eps=0.001, momentum=0.1, affine=True, "
                                 "track_running_stats=True)",
                                 out));
    net.Relu("relu").Close();
  };
  auto square = [&](const std::string& label, int in, int out, int k, int stride = 1,
                    int pad = 0) { basic(label, in, out, k, k, stride, pad, pad); };
  square("Conv2d_1a_3x3", 3, 32, 3, 2);
  square("Conv2d_2a_3x3", 32, 32, 3);
  square("Conv2d_2b_3x3", 32, 64, 3, 1, 1);
  net.MaxPool("maxpool1", 3, 2, 0);
  square("Conv2d_3b_1x1", 64, 80, 1);
  square("Conv2d_4a_3x3", 80, 192, 3);
  net.MaxPool("maxpool2", 3, 2, 0);
  struct BlockIn {
    const char* label;
    int in, width;  // input channels; InceptionA: pool features, C: 7x7 channels
  };
  for (const BlockIn& block : {BlockIn{"Mixed_5b", 192, 32}, BlockIn{"Mixed_5c", 256, 64},
                               BlockIn{"Mixed_5d", 288, 64}}) {
    const int in = block.in, pool = block.width;
    const std::string label = block.label;
    net.Open(label, "InceptionA");
    square("branch1x1", in, 64, 1);
    square("branch5x5_1", in, 48, 1);
    square("branch5x5_2", 48, 64, 5, 1, 2);
    square("branch3x3dbl_1", in, 64, 1);
    square("branch3x3dbl_2", 64, 96, 3, 1, 1);
    square("branch3x3dbl_3", 96, 96, 3, 1, 1);
    square("branch_pool", in, pool, 1);
    net.Close();
  }
  net.Open("Mixed_6a", "InceptionB");
  square("branch3x3", 288, 384, 3, 2);
  square("branch3x3dbl_1", 288, 64, 1);
  square("branch3x3dbl_2", 64, 96, 3, 1, 1);
  square("branch3x3dbl_3", 96, 96, 3, 2);
  net.Close();
  for (const BlockIn& block : {BlockIn{"Mixed_6b", 768, 128}, BlockIn{"Mixed_6c", 768, 160},
                               BlockIn{"Mixed_6d", 768, 160}, BlockIn{"Mixed_6e", 768, 192}}) {
    const int c7 = block.width;
    const std::string label = block.label;
    net.Open(label, "InceptionC");
    square("branch1x1", 768, 192, 1);
    square("branch7x7_1", 768, c7, 1);
    basic("branch7x7_2", c7, c7, 1, 7, 1, 0, 3);
    basic("branch7x7_3", c7, 192, 7, 1, 1, 3, 0);
    square("branch7x7dbl_1", 768, c7, 1);
    basic("branch7x7dbl_2", c7, c7, 7, 1, 1, 3, 0);
    basic("branch7x7dbl_3", c7, c7, 1, 7, 1, 0, 3);
    basic("branch7x7dbl_4", c7, c7, 7, 1, 1, 3, 0);
    basic("branch7x7dbl_5", c7, 192, 1, 7, 1, 0, 3);
    square("branch_pool", 768, 192, 1);
    net.Close();
  }
  net.Open("Mixed_7a", "InceptionD");
  square("branch3x3_1", 768, 192, 1);
  square("branch3x3_2", 192, 320, 3, 2);
  square("branch7x7x3_1", 768, 192, 1);
  basic("branch7x7x3_2", 192, 192, 1, 7, 1, 0, 3);
  basic("branch7x7x3_3", 192, 192, 7, 1, 1, 3, 0);
  square("branch7x7x3_4", 192, 192, 3, 2);
  net.Close();
  for (const BlockIn& block : {BlockIn{"Mixed_7b", 1280, 0}, BlockIn{"Mixed_7c", 2048, 0}}) {
    const int in = block.in;
    const std::string label = block.label;
    net.Open(label, "InceptionE");
    square("branch1x1", in, 320, 1);
    square("branch3x3_1", in, 384, 1);
    basic("branch3x3_2a", 384, 384, 1, 3, 1, 0, 1);
    basic("branch3x3_2b", 384, 384, 3, 1, 1, 1, 0);
    square("branch3x3dbl_1", in, 448, 1);
    square("branch3x3dbl_2", 448, 384, 3, 1, 1);
    basic("branch3x3dbl_3a", 384, 384, 1, 3, 1, 0, 1);
    basic("branch3x3dbl_3b", 384, 384, 3, 1, 1, 1, 0);
    square("branch_pool", in, 192, 1);
    net.Close();
  }
  return net.Head(2048, 0.5).Done();
}

TEST(G10CnnImporter, InceptionV3MatchesG10KernelCount) {
  absl::StatusOr<G10Model> model = ParseG10CnnGraph(InceptionV3(), "Inceptionv3.txt", 1280,
                                                    G10DefaultInputSize("Inceptionv3"));
  ASSERT_TRUE(model.ok()) << model.status();
  // G10's results/Inceptionv3/cudnn<B>*.txt files have 929 lines, one per
  // kernel. In its cudnn1280Workspace.txt the only non-convolution kernels
  // with a workspace are 312 and 320: the Dropout's forward and backward.
  ASSERT_EQ(model->kernels.size(), 929u);
  EXPECT_EQ(model->kernels[312].name, "Dropout_Forward");
  EXPECT_EQ(model->kernels[314].name, "makeLoss");
  EXPECT_EQ(model->kernels[320].name, "Dropout_Backward");
  // 3 A + 1 B + 4 C + 1 D blocks have one Concat, the 2 E blocks three; 11
  // pools are inserted next to the stem's 2.
  EXPECT_EQ(CountKernels(*model, "Concat_Forward"), 15);
  EXPECT_EQ(CountKernels(*model, "MaxPool2d_Forward"), 13);

  // InceptionA: four branches from the block's input, joined in order; the
  // pool branch starts with the inserted MaxPool2d(3, 1, 1).
  const G10Kernel* concat = FindKernel(*model, "Concat_Forward", "Mixed_5b.concat output");
  ASSERT_NE(concat, nullptr);
  EXPECT_THAT(Whats(*model, concat->inputs),
              ElementsAre("Mixed_5b.branch1x1.bn output", "Mixed_5b.branch5x5_2.bn output",
                          "Mixed_5b.branch3x3dbl_3.bn output", "Mixed_5b.branch_pool.bn output"));
  const G10Kernel* pool = FindKernel(*model, "MaxPool2d_Forward", "Mixed_5b.pool3 output");
  ASSERT_NE(pool, nullptr);
  EXPECT_THAT(Whats(*model, pool->inputs), ElementsAre("maxpool2 output"));
  // The Concat's output is 1280 x 256 x 35 x 35 floats.
  EXPECT_EQ(model->tensors[concat->outputs[0]].raw_bytes, 4ull * 1280 * 256 * 35 * 35);
  // InceptionE: branch3x3_1 feeds both 2a and 2b, joined by an inner Concat.
  const G10Kernel* inner = FindKernel(*model, "Concat_Forward", "Mixed_7b.concat1 output");
  ASSERT_NE(inner, nullptr);
  EXPECT_THAT(Whats(*model, inner->inputs),
              ElementsAre("Mixed_7b.branch3x3_2a.bn output", "Mixed_7b.branch3x3_2b.bn output"));
  const G10Kernel* conv =
      FindKernel(*model, "Conv2d_Forward", "Mixed_7b.branch3x3_2b.conv output");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(model->tensors[conv->inputs.at(0)].what, "Mixed_7b.branch3x3_1.bn output");
}

// SENet-154 as in G10's frontend/Nets/SENet154.txt.
std::string SeNet154() {
  NetText net("SENet");
  auto conv_block = [&](const std::string& label, int in, int out, int k, int stride, int pad,
                        bool activ) {
    net.Open(label, "ConvBlock").Conv("conv", in, out, k, stride, pad).Bn("bn", out);
    if (activ) net.Relu("activ");
    net.Close();
  };
  net.Open("features", "Sequential").Open("init_block", "SEInitBlock");
  conv_block("conv1", 3, 64, 3, 2, 1, true);
  conv_block("conv2", 64, 64, 3, 1, 1, true);
  conv_block("conv3", 64, 128, 3, 1, 1, true);
  net.MaxPool("pool", 3, 2, 1).Close();
  int in = 128;
  const int units[] = {3, 8, 36, 3};
  for (int stage = 1; stage <= 4; ++stage) {
    const int out = 128 << stage;
    net.Open(absl::StrCat("stage", stage), absl::StrCat("Sequential", stage));
    for (int unit = 1; unit <= units[stage - 1]; ++unit) {
      const int stride = unit == 1 && stage > 1 ? 2 : 1;
      const int mid = unit > 1 ? out / 2 : stage == 1 ? 128 : in;
      net.Open(absl::StrCat("unit", unit), "SENetUnit").Open("body", "SENetBottleneck");
      conv_block("conv1", in, mid, 1, 1, 0, true);
      conv_block("conv2", mid, out, 3, stride, 1, true);
      conv_block("conv3", out, out, 1, 1, 0, false);
      net.Close().Open("se", "SEBlock").Op("pool", "AdaptiveAvgPool2d(output_size=(1, 1))");
      net.Conv("conv1", out, out / 16, 1).Relu("activ").Conv("conv2", out / 16, out, 1);
      net.Relu("sigmoid").Close();
      if (unit == 1) {
        conv_block("identity_conv", in, out, stage == 1 ? 1 : 3, stride, stage == 1 ? 0 : 1,
                   false);
      }
      net.Relu("activ").Close();
      in = out;
    }
    net.Close();
  }
  net.MaxPool("final_pool", 7, 1, 0).Close().Open("output", "Sequential5");
  net.Op("dropout", "Dropout(p=0.2, inplace=False)");
  return net.Op("fc", "Linear(in_features=2048, out_features=1000, bias=True)").Close().Done();
}

TEST(G10CnnImporter, SeNet154MatchesG10KernelCount) {
  absl::StatusOr<G10Model> model = ParseG10CnnGraph(SeNet154(), "SENet154.txt", 1024,
                                                    G10DefaultInputSize("SENet154"));
  ASSERT_TRUE(model.ok()) << model.status();
  // G10's results/SENet154/cudnn<B>*.txt files have 2319 lines.
  ASSERT_EQ(model->kernels.size(), 2319u);
  EXPECT_EQ(CountKernels(*model, "Scale_Forward"), 50);
  EXPECT_EQ(CountKernels(*model, "Add_Forward"), 50);
  EXPECT_EQ(model->kernels.back().name, "Conv2d_Apply_Grad");
  // With an identity conv: the Add joins the Scale and the identity conv's
  // BatchNorm, and the identity conv reads the unit's input.
  const G10Kernel* add = FindKernel(*model, "Add_Forward", "features.stage2.unit1.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(*model, add->inputs),
              ElementsAre("features.stage2.unit1.scale output",
                          "features.stage2.unit1.identity_conv.bn output"));
  const G10Kernel* identity =
      FindKernel(*model, "Conv2d_Forward", "features.stage2.unit1.identity_conv.conv output");
  ASSERT_NE(identity, nullptr);
  EXPECT_EQ(model->tensors[identity->inputs.at(0)].what, "features.stage1.unit3.add output");
  // The Scale reads the SE block's sigmoid (in place on its conv2) and
  // outputs at the identity path's size: 1024 x 512 x 28 x 28 floats.
  const G10Kernel* scale =
      FindKernel(*model, "Scale_Forward", "features.stage2.unit1.scale output");
  ASSERT_NE(scale, nullptr);
  EXPECT_THAT(Whats(*model, scale->inputs), ElementsAre("features.stage2.unit1.se.conv2 output"));
  EXPECT_EQ(model->tensors[scale->outputs[0]].raw_bytes, 4ull * 1024 * 512 * 28 * 28);
  // Without: the Add joins the Scale and the unit's input.
  add = FindKernel(*model, "Add_Forward", "features.stage2.unit2.add output");
  ASSERT_NE(add, nullptr);
  EXPECT_THAT(Whats(*model, add->inputs), ElementsAre("features.stage2.unit2.scale output",
                                                      "features.stage2.unit1.add output"));
}

// ---------------------------------------------------------------------------
// The CLI and the g10 workload.

TEST(G10CnnImporter, RunsOnTheSim) { g10_test::ExpectRunsOnTheSim("ResNet152", 1280, 1299); }

TEST(G10CnnImporter, ImportWritesATraceReplayAccepts) {
  g10_test::ExpectImportThenReplay("ResNet152", 1280, "3330 tensors, 1299 kernels");
}

TEST(G10CnnImporter, BorderIsForTransformersOnly) {
  absl::StatusOr<G10Model> model = LoadG10Model(kFixture, "ResNet152", 1280, 210);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("ResNet152.txt:1: border=210 applies to transformer graphs only"));
  EXPECT_EQ(G10DefaultBorder("ResNet152"), 0);
  EXPECT_EQ(G10DefaultInputSize("ResNet152"), 224);
  EXPECT_EQ(G10DefaultInputSize("Inceptionv3"), 299);
}

// ---------------------------------------------------------------------------
// Bad input: one line naming file:line and what to do.

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(G10CnnImporter, CorruptGraphGivesOneLineError) {
  const std::string dir = CopyFixture("corrupt_graph");
  const std::string path = dir + "/frontend/Nets/ResNet152.txt";
  std::string text = ReadAll(path);
  // Line 2 is the stem conv.
  const size_t at = text.find("kernel_size=(7, 7)");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 18, "kernel_size=(7; 7)");
  std::ofstream(path, std::ios::trunc) << text;
  std::ostringstream out, err;
  EXPECT_EQ(cli::Main({"import-g10", "--model=ResNet152", "--batch=1280", "--dir=" + dir,
                       "--output=" + dir + "/out.umt"},
                      out, err),
            cli::kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("ResNet152.txt:2: unexpected character ';'"));
  EXPECT_EQ(CountLines(err.str()), 1) << err.str();
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.umt"));
}

TEST(G10CnnImporter, TimesForAnotherGraphAreRejected) {
  // A PF file one line short of the graph's kernels: the count mismatch
  // names the file and the line.
  const std::string dir = CopyFixture("short_graph");
  const std::string results = dir + "/results/ResNet152/cudnn1280";
  std::string text = ReadAll(results + "PF.txt");
  text.resize(text.rfind("1298 "));
  std::ofstream(results + "PF.txt", std::ios::trunc) << text;
  absl::StatusOr<G10Model> model = LoadG10Model(dir, "ResNet152", 1280);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("cudnn1280PF.txt:1299: has 1298 kernel lines but the graph"));
}

struct BadNet {
  std::string text;
  std::string error;
};

TEST(G10CnnImporter, BadNetsGiveOneLineErrors) {
  const std::string conv = "(conv1): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), bias=False)";
  const std::string bn = "(bn1): BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, "
                         "track_running_stats=True)";
  const BadNet cases[] = {
      {"Net(\n  " + conv + "\n  (act): Sigmoid()\n)\n",
       "net.txt:3: 'Sigmoid' is not an operator G10 models"},
      {"Net(\n  (conv1): Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), groups=2, "
       "bias=False)\n)\n",
       "net.txt:2: Conv2d argument 'groups' is not in G10's grammar"},
      {"Net(\n  " + conv + "\n  (conv2): Conv2d(8, 4, kernel_size=(3, 3), stride=(1, 1))\n)\n",
       "net.txt:3: conv2: Conv2d takes 8 channels but its input has 4"},
      {"Net(\n  " + conv + "\n  (b): Bottleneck(\n    " + bn + "\n  )\n)\n",
       "net.txt:3: b (Bottleneck): it has 1 entries, but G10 wires 7"},
      {"Net(\n  " + bn + "\n)\n", "net.txt:2: bn1: the first layer is a BatchNorm2d"},
      {"Net(\n  " + conv + "\n", "net.txt:3: expected ')', found the end of the file"},
      {"Net(\n  (fc): Linear(in_features=3, out_features=2, bias=True)\n)\n",
       "net.txt:2: fc: the first layer is a Linear"},
  };
  for (const BadNet& bad : cases) {
    absl::StatusOr<G10Model> model = ParseG10CnnGraph(bad.text, "net.txt", 2, 8);
    ASSERT_FALSE(model.ok()) << bad.text;
    const std::string message(model.status().message());
    EXPECT_THAT(message, HasSubstr(bad.error)) << bad.text;
    EXPECT_THAT(message, Not(HasSubstr("\n")));
  }
}

}  // namespace
}  // namespace umlab
