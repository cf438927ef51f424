// GPT-2's activation as transformers' NewGELUActivation computes it, op by
// op (no fused kernel):
//   a = 0.5 * x;  p = x ** 3;  b = 0.044715 * p;  c = x + b;
//   d = sqrt(2 / pi) * c;  t = tanh(d);  e = 1 + t;  y = a * e
// Autograd keeps x (for pow), t (tanh's result), a and e (the product's
// operands); the multiplications by constants and the additions keep
// nothing. Backward, in reverse: the product's two gradients, tanh's, the
// constant multiplications, pow's three kernels (x ** 2, times 3, times
// the gradient) and the sums into x's gradient: eleven kernels, the
// sequence the profiler shows on PyTorch 2.11.
#include <utility>

#include "absl/strings/str_cat.h"
#include "workloads/dnn/training_graph.h"

namespace umlab {
int TrainingGraph::GeluTanhComposed(int x, const std::string& name, uint64_t elements) {
  const double n = D(elements);
  const std::string size = absl::StrCat(elements);
  // One elementwise kernel of `inputs` into a new tensor.
  auto op = [&](const std::string& what, std::vector<int> inputs, bool requires_grad) {
    const int out = Activation(absl::StrCat(name, ".", what), elements, requires_grad);
    std::vector<KernelAccess> accesses;
    for (int input : inputs) accesses.push_back(R(input));
    accesses.push_back(W(out));
    Kernel(absl::StrCat(name, ".gelu_", what, "_", size), n, false, std::move(accesses));
    return out;
  };
  const int a = op("half_x", {x}, true);
  const int p = op("x_cubed", {x}, false);
  const int b = op("scaled_cube", {p}, false);
  Unref(p);
  const int c = op("inner_sum", {x, b}, false);
  Unref(b);
  const int d = op("scaled_inner", {c}, false);
  Unref(c);
  const int t = op("tanh", {d}, false);
  Unref(d);
  const int e = op("one_plus_tanh", {t}, false);
  const int y = op("out", {a, e}, true);

  TapeEntry entry{{y}, {}, nullptr};
  Save(entry, x);
  Save(entry, t);
  Save(entry, a);
  Save(entry, e);
  entry.backward = [=, this](const std::vector<int>& g) {
    auto grad = [&](const std::string& what, std::vector<int> inputs) {
      const int out = NewTensor(absl::StrCat(name, ".", what, ".grad"), elements * element_,
                                TensorRole::kGradient, false);
      std::vector<KernelAccess> accesses;
      for (int input : inputs) accesses.push_back(R(input));
      accesses.push_back(W(out));
      Kernel(absl::StrCat(name, ".gelu_bwd_", what, "_", size), n, false, std::move(accesses));
      return out;
    };
    const int g_a = grad("half_x", {g[0], e});
    const int g_e = grad("one_plus_tanh", {g[0], a});
    const int g_d = grad("tanh", {g_e, t});
    Unref(g_e);
    const int g_c = grad("inner_sum", {g_d});
    Unref(g_d);
    const int g_p = grad("x_cubed", {g_c});
    const int x_squared = grad("x_squared", {x});
    const int g_pow = grad("pow_scale", {x_squared});
    Unref(x_squared);
    const int g_x_pow = grad("pow", {g_p, g_pow});
    Unref(g_p);
    Unref(g_pow);
    const int sum = grad("x_sum", {g_c, g_x_pow});
    Unref(g_c);
    Unref(g_x_pow);
    const int g_x_half = grad("half_x_x", {g_a});
    Unref(g_a);
    const int gx = Grad(x, Bytes(x));
    Kernel(absl::StrCat(name, ".gelu_bwd_x_", size), n, false, {R(sum), R(g_x_half), W(gx)});
    Unref(sum);
    Unref(g_x_half);
    AddGrad(x, gx);
  };
  Record(std::move(entry));
  Unref(t);
  Unref(a);
  Unref(e);
  Unref(x);
  return y;
}

}  // namespace umlab
