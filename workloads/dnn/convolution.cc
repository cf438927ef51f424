// Conv2d forward and backward as cuDNN 9 runs them under PyTorch 2.11 for
// fp32 NCHW tensors, read off the profiler on an H100 (ResNet-50 and
// MobileNetV2 training, bench/torch_zoo_probe.py --dump):
//
// - 1x1 stride-1 convolutions are GEMMs on the NCHW tensors: one kernel
//   forward, and backward a data-gradient GEMM plus a weight-gradient GEMM
//   whose split partial sums one more kernel reduces (reduce_wgrad_nchw).
// - Depthwise convolutions (groups == channels) run PyTorch's own
//   conv_depthwise2d kernels: one forward, two backward.
// - Every other convolution runs an NHWC implicit-GEMM kernel with layout
//   transforms around it, each into cuDNN workspace that PyTorch's caching
//   allocator hands out for the call: forward, input and weight to NHWC,
//   the kernel, the output back to NCHW (4 kernels); data gradient, the
//   output gradient to NHWC, the kernel, the result back (3); weight
//   gradient, the output gradient and the input to NHWC, a workspace
//   initialisation, the kernel, the result back (5).
//
// cuDNN picks engines by heuristics, so a layer now and then skips a
// transform; the counts above are the common case (ResNet-50: 672 kernels
// an iteration here against 739 measured).
#include <utility>

#include "absl/strings/str_cat.h"
#include "workloads/dnn/training_graph.h"

namespace umlab {
namespace {

enum class ConvolutionPath { kGemm, kDepthwise, kImplicitGemm };

ConvolutionPath PathOf(const ConvLayer& layer) {
  if (layer.groups > 1 && layer.groups == layer.in) return ConvolutionPath::kDepthwise;
  if (layer.kernel == 1 && layer.stride == 1 && layer.groups == 1) return ConvolutionPath::kGemm;
  return ConvolutionPath::kImplicitGemm;
}

}  // namespace

int TrainingGraph::NhwcCopy(const std::string& kernel, int tensor) {
  const int copy = Workspace(Name(tensor) + ".nhwc", Bytes(tensor));
  Kernel(kernel, 0, false, {R(tensor), W(copy)});
  return copy;
}

int TrainingGraph::Conv2d(const ConvLayer& layer, int x, ImageShape in, ImageShape* out) {
  ImageShape o{in.n, layer.out, (in.h + 2 * layer.padding - layer.kernel) / layer.stride + 1,
               (in.w + 2 * layer.padding - layer.kernel) / layer.stride + 1};
  *out = o;
  const int y = Activation(layer.name + ".out", o.elements());
  const double flops =
      2.0 * D(o.elements()) * D(layer.in / layer.groups) * D(layer.kernel * layer.kernel);
  const std::string shape = absl::StrCat(in.n, "x", in.c, "x", in.h, "x", in.w, "_k",
                                         layer.kernel, "s", layer.stride, "g", layer.groups,
                                         "_", layer.out);
  const std::string name = layer.name + ".conv";
  const ConvolutionPath path = PathOf(layer);
  if (path == ConvolutionPath::kImplicitGemm) {
    const int x_nhwc = NhwcCopy(name + "_fwd_nchw_to_nhwc_x_" + shape, x);
    const int w_nhwc = NhwcCopy(name + "_fwd_nchw_to_nhwc_w_" + shape, layer.weight);
    const int y_nhwc = Workspace(Name(y) + ".nhwc", Bytes(y));
    WeightedForward(name + "_fwd_" + shape, flops, x_nhwc, w_nhwc, layer.bias, y_nhwc,
                    o.n * o.h * o.w);
    Unref(x_nhwc);
    Unref(w_nhwc);
    Kernel(name + "_fwd_nhwc_to_nchw_" + shape, 0, false, {R(y_nhwc), W(y)});
    Unref(y_nhwc);
  } else {
    WeightedForward(name + "_fwd_" + shape, flops, x, layer.weight, layer.bias, y,
                    o.n * o.h * o.w);
  }
  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, x);
  entry.backward = [this, layer, x, flops, shape, name, path, o, in](const std::vector<int>& g) {
    const int gy = g[0];
    const uint64_t input_positions = in.n * in.h * in.w;
    if (path != ConvolutionPath::kImplicitGemm) {
      WeightedBackward(name, shape, flops, x, layer.weight, gy, input_positions);
      if (path == ConvolutionPath::kGemm) {
        // The weight-gradient GEMM splits its reduction; one more kernel
        // sums the partials into the gradient it just accumulated.
        const int gw = grad_[layer.weight];
        Kernel(name + "_wgrad_reduce_" + shape, D(Bytes(gw) / element_), false,
               {R(gw), W(gw)});
      }
    } else {
      if (RequiresGrad(x)) {
        const int gy_nhwc = NhwcCopy(name + "_dgrad_nchw_to_nhwc_" + shape, gy);
        const int gx_nhwc = Workspace(Name(x) + ".grad.nhwc", Bytes(x));
        Kernel(name + "_dgrad_" + shape, flops, half(),
               {R(gy_nhwc), GemmWeightRead(layer.weight, input_positions), W(gx_nhwc)});
        Unref(gy_nhwc);
        const int gx = Grad(x, Bytes(x));
        Kernel(name + "_dgrad_nhwc_to_nchw_" + shape, 0, false, {R(gx_nhwc), W(gx)});
        Unref(gx_nhwc);
        AddGrad(x, gx);
      }
      const int gy_nhwc = NhwcCopy(name + "_wgrad_nchw_to_nhwc_gy_" + shape, gy);
      const int x_nhwc = NhwcCopy(name + "_wgrad_nchw_to_nhwc_x_" + shape, x);
      const int gw_nhwc = Workspace(Name(layer.weight) + ".grad.nhwc", Bytes(layer.weight));
      Kernel(name + "_wgrad_init_workspace_" + shape, 0, false, {W(gw_nhwc)});
      Kernel(name + "_wgrad_" + shape, flops, half(), {R(gy_nhwc), R(x_nhwc), W(gw_nhwc)});
      Unref(gy_nhwc);
      Unref(x_nhwc);
      const int gw = Grad(layer.weight, Bytes(layer.weight));
      Kernel(name + "_wgrad_nhwc_to_nchw_" + shape, 0, false, {R(gw_nhwc), W(gw)});
      Unref(gw_nhwc);
      AddGrad(layer.weight, gw);
    }
    if (layer.bias >= 0) {
      BiasBackward(layer.name + ".conv_bias_grad_" + shape, D(o.elements()), layer.bias, gy);
    }
  };
  Record(std::move(entry));
  Unref(x);
  return y;
}

}  // namespace umlab
