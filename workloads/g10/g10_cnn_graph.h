// G10's CNN front end: PyTorch's print(model) text (frontend/Nets/ResNet152.txt
// and the other CNN files of G10's artifact), turned into tensors and kernels
// as G10 does it. Facts follow G10's src/parser.y and src/scanner.l (the
// accepted text, parsed by g10_torch_print.h), src/ast.cc
// (UserBlock::Analysis: the residual and branch structure G10 hard-codes by
// block name), and src/analysis.cc (layer_pre_pass_datasize,
// layer_first_pass_dataflow, layer_second_pass_scheduling_kernels). The format is summarised in
// data/g10/FORMAT.md; the loader is g10_graph.h.
//
// Every printed operator (Conv2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear,
// Dropout, BatchNorm2d) is one layer, chained to the layer printed before it.
// Containers are transparent, except these block names, which G10 rewires:
//   - Bottleneck (7 entries, or 8 with a downsample Sequential) and BasicBlock
//     (5, or 6): a new Add joins the block's main path with its input, or with
//     the downsample path, which then starts from the block's input (ResNet,
//     ResNeXt, Wide ResNet).
//   - InceptionA..InceptionE (Inception-v3), each entry a BasicConv2d of
//     conv, bn, relu: the branches start from the block's input and a new
//     Concat joins them; A, C and E get a MaxPool2d(3, 1, 1) before their
//     pool branch, B and D a MaxPool2d(3, 2, 0) branch; E's split 3x3
//     branches get their own inner Concats.
//   - SENetUnit (SENet-154; body, se, [identity_conv,] activ): a new Scale
//     after the SE block and a new Add that joins it with the unit's input
//     (or the identity conv, which then starts from the unit's input).
// Other block names chain plainly, as in G10 (AlexNet- or VGG-style nets).
//
// Shapes start from (batch, first conv's in_channels, input, input) and
// propagate as G10 computes them: (H - k + 2p) / s + 1 for convolutions and
// max pools (dilation and ceil_mode are ignored, as in G10). Weights,
// BatchNorm scale/shift and running statistics, and Linear biases are global;
// everything else is an intermediate.
#ifndef UMLAB_WORKLOADS_G10_G10_CNN_GRAPH_H_
#define UMLAB_WORKLOADS_G10_G10_CNN_GRAPH_H_

#include <string>

#include "absl/status/statusor.h"
#include "workloads/g10/g10_graph.h"

namespace umlab {

// Parses a CNN graph already in memory; `source` names it in errors.
// `input_size` is the input image's height and width (G10's input_H/input_W:
// 224, or 299 for Inception-v3; see G10DefaultInputSize). Kernel times are
// left zero and no workspace tensors are added (LoadG10Model does both).
absl::StatusOr<G10Model> ParseG10CnnGraph(const std::string& text, const std::string& source,
                                          int batch, int input_size);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_CNN_GRAPH_H_
