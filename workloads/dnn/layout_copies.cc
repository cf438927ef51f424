// The copies a layout change costs: x.contiguous() on a transposed view, a
// broadcast bias added on its own, as torchvision's MultiheadAttention
// (batch_first=True) makes them. It transposes its input to [T, B, C],
// so `in_proj` runs on a non-contiguous view (a copy, a GEMM without bias,
// then the bias added), the packed q, k, v are made contiguous, the
// attention output is permuted back with a copy, and each residual sum
// comes out transposed and is copied before the next LayerNorm. Each copy's
// backward copies the gradient back.
#include "absl/strings/str_cat.h"
#include "workloads/dnn/training_graph.h"

namespace umlab {
int TrainingGraph::Contiguous(int x, const std::string& name) {
  const uint64_t elements = Bytes(x) / element_;
  const int y = Activation(name + ".contiguous", elements, RequiresGrad(x));
  const std::string size = absl::StrCat(elements);
  Kernel(name + ".copy_" + size, 0, false, {R(x), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  entry.backward = [this, x, name, size](const std::vector<int>& g) {
    const int gx = Grad(x, Bytes(x));
    Kernel(name + ".copy_bwd_" + size, 0, false, {R(g[0]), W(gx)});
    AddGrad(x, gx);
  };
  Record(std::move(entry));
  Unref(x);
  return y;
}

int TrainingGraph::AddBiasInPlace(int y, int bias, const std::string& name) {
  const uint64_t elements = Bytes(y) / element_;
  const std::string size = absl::StrCat(elements);
  Kernel(name + ".bias_add_" + size, D(elements), false,
         {R(y), R(bias), W(y)});
  TapeEntry entry{{y}, {}, nullptr};
  entry.backward = [this, y, bias, name, size, elements](const std::vector<int>& g) {
    BiasBackward(name + ".bias_grad_" + size, D(elements), bias, g[0]);
    ++handles_[g[0]].refs;
    AddGrad(y, g[0]);
  };
  Record(std::move(entry));
  return y;
}

}  // namespace umlab
