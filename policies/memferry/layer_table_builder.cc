#include "policies/memferry/layer_table_builder.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/tensor_role.h"
#include "policies/memferry/page_set.h"

namespace umlab {
namespace {

Nanos KernelOverhead(const DeviceConfig& device) {
  return device.kernel_launch_ns + device.kernel_grid_ns;
}

Nanos ComputeTime(const GraphKernel& kernel, const DeviceConfig& device) {
  return std::max<Nanos>(kernel.duration_ns, 0) + KernelOverhead(device);
}

bool HasRole(const IterationGraph& iteration, uint32_t tensor, TensorRole role) {
  const std::optional<TensorRole>& r = iteration.tensors[tensor].role;
  return r.has_value() && *r == role;
}

bool TouchesRole(const IterationGraph& iteration, const std::vector<uint32_t>& tensors,
                 TensorRole role) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](uint32_t t) { return HasRole(iteration, t, role); });
}

// The parameters a kernel reads or writes, ascending and distinct.
std::vector<uint32_t> ParametersOf(const IterationGraph& iteration, const GraphKernel& kernel) {
  std::vector<uint32_t> out;
  for (const std::vector<uint32_t>* list : {&kernel.reads, &kernel.writes}) {
    for (uint32_t t : *list) {
      if (HasRole(iteration, t, TensorRole::kParameter)) out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Disjoint sets of tensor indices: the parameters that move together.
class ParameterGroups {
 public:
  explicit ParameterGroups(size_t tensors) : parent_(tensors) {
    std::iota(parent_.begin(), parent_.end(), 0u);
  }
  uint32_t Find(uint32_t t) {
    while (parent_[t] != t) t = parent_[t] = parent_[parent_[t]];
    return t;
  }
  void Join(uint32_t a, uint32_t b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<uint32_t> parent_;
};

// "transformer.h.0.attn.c_attn" of "transformer.h.0.attn.c_attn.gemm_fwd_1024x2304x768":
// the name up to its last dot, which the zoo's generators put between a
// layer's name and the op.
absl::string_view LayerPrefix(absl::string_view kernel_name) {
  const size_t dot = kernel_name.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view() : kernel_name.substr(0, dot);
}

class TableBuilder {
 public:
  TableBuilder(const IterationGraph& iteration,
               const absl::flat_hash_map<uint32_t, std::string>& names,
               const DeviceConfig& device)
      : iteration_(iteration), names_(names), device_(device) {}

  absl::StatusOr<ProgramLayers> Build() {
    FindPasses();
    FormLayers();
    if (out_.layers.empty()) {
      return absl::FailedPreconditionError(
          "memferry plans over parameters, and no forward kernel of the iteration touches a "
          "tensor the program calls a parameter (a program without tensor roles, such as a "
          "recorded PyTorch run or an older trace, says nothing of them)");
    }
    ClaimByName();
    FindGradients();
    AddForwardTimes();
    AddBackwardTimes();
    AddGradientTimes();
    AddTransfers();
    return std::move(out_);
  }

 private:
  const std::vector<GraphKernel>& kernels() const { return iteration_.kernels; }

  void FindPasses() {
    const size_t n = kernels().size();
    out_.backward_begin = n;
    out_.step_begin = n;
    for (size_t k = 0; k < n; ++k) {
      const GraphKernel& kernel = kernels()[k];
      const bool optimizer = TouchesRole(iteration_, kernel.reads, TensorRole::kOptimizerState) ||
                             TouchesRole(iteration_, kernel.writes, TensorRole::kOptimizerState);
      out_.optimizer_on_device |= optimizer;
      if (out_.backward_begin == n) {
        if (TouchesRole(iteration_, kernel.writes, TensorRole::kGradient)) out_.backward_begin = k;
      } else if (out_.step_begin == n &&
                 (optimizer || TouchesRole(iteration_, kernel.writes, TensorRole::kParameter))) {
        out_.step_begin = k;
      }
    }
  }

  // Groups the parameters by forward kernel and by the layer name of the
  // forward kernels that touch them (a convolution whose weight and bias
  // two kernels read), then numbers the groups in the order of their first
  // forward kernel.
  void FormLayers() {
    ParameterGroups groups(iteration_.tensors.size());
    absl::flat_hash_map<std::string, uint32_t> named;  // layer name -> a parameter of it
    for (size_t k = 0; k < out_.backward_begin; ++k) {
      const std::vector<uint32_t> touched = ParametersOf(iteration_, kernels()[k]);
      if (touched.empty()) continue;
      for (size_t i = 1; i < touched.size(); ++i) groups.Join(touched[i], touched[0]);
      const absl::string_view prefix = LayerPrefix(Name(k));
      if (prefix.empty()) continue;
      const auto [it, added] = named.emplace(std::string(prefix), touched[0]);
      if (!added) groups.Join(touched[0], it->second);
    }
    absl::flat_hash_map<uint32_t, int> layer_of_group;
    for (size_t k = 0; k < out_.backward_begin; ++k) {
      for (uint32_t t : ParametersOf(iteration_, kernels()[k])) {
        const auto [it, added] =
            layer_of_group.emplace(groups.Find(t), static_cast<int>(out_.layers.size()));
        if (added) {
          LayerKernels layer;
          layer.first_forward = k;
          layer.forward_end = k;
          layer.first_backward = kNoKernel;
          layer.last_backward = kNoKernel;
          out_.layers.push_back(std::move(layer));
          out_.table.layers.emplace_back();
        }
      }
    }
    layer_of_tensor_.assign(iteration_.tensors.size(), -1);
    for (uint32_t t = 0; t < iteration_.tensors.size(); ++t) {
      if (!HasRole(iteration_, t, TensorRole::kParameter)) continue;
      auto it = layer_of_group.find(groups.Find(t));
      if (it == layer_of_group.end()) continue;  // no forward kernel touches it
      layer_of_tensor_[t] = it->second;
      out_.layers[static_cast<size_t>(it->second)].parameters.push_back(t);
    }
  }

  // The layer a kernel's parameters belong to (the first in forward order
  // if it touches several), or -1.
  int LayerByParameters(const GraphKernel& kernel) const {
    int layer = -1;
    for (uint32_t t : ParametersOf(iteration_, kernel)) {
      const int of = layer_of_tensor_[t];
      if (of >= 0 && (layer < 0 || of < layer)) layer = of;
    }
    return layer;
  }

  // The name prefixes of each layer's forward kernels, and its name. A
  // prefix two layers share claims nothing.
  void ClaimByName() {
    absl::flat_hash_map<std::string, int> owners;
    for (size_t k = 0; k < out_.backward_begin; ++k) {
      const int layer = LayerByParameters(kernels()[k]);
      if (layer < 0) continue;
      const absl::string_view prefix = LayerPrefix(Name(k));
      if (prefix.empty()) continue;
      const auto [it, added] = owners.emplace(std::string(prefix), layer);
      if (!added && it->second != layer) it->second = -1;
    }
    prefix_owner_ = std::move(owners);
    for (size_t l = 0; l < out_.layers.size(); ++l) {
      const absl::string_view prefix = LayerPrefix(Name(out_.layers[l].first_forward));
      out_.table.layers[l].name =
          prefix.empty() ? absl::StrFormat("layer %d", l) : std::string(prefix);
    }
  }

  absl::string_view Name(size_t k) const {
    auto it = names_.find(kernels()[k].exec_id);
    return it == names_.end() ? absl::string_view() : absl::string_view(it->second);
  }

  // A kernel's layer: by the parameters it touches, else by the longest
  // layer prefix its name starts with; -1 for neither.
  int LayerOf(size_t k) const {
    const int layer = LayerByParameters(kernels()[k]);
    if (layer >= 0) return layer;
    for (absl::string_view prefix = LayerPrefix(Name(k)); !prefix.empty();
         prefix = LayerPrefix(prefix)) {
      auto it = prefix_owner_.find(prefix);
      if (it != prefix_owner_.end()) return it->second;
    }
    return -1;
  }

  // The parameter gradients: the gradient tensors the step reads. Each is
  // the layer's whose backward kernel first writes it, or, when no layer
  // claims that kernel (a wgrad named after no layer), the layer whose
  // parameters a step kernel reading it updates, if it updates one layer's
  // only (a per-parameter step; a foreach kernel updates many).
  void FindGradients() {
    out_.gradients.assign(out_.layers.size(), LayerGradients());
    gradient_layer_.assign(iteration_.tensors.size(), -1);
    std::vector<bool> read_by_step(iteration_.tensors.size(), false);
    for (size_t k = out_.step_begin; k < kernels().size(); ++k) {
      for (uint32_t t : kernels()[k].reads) read_by_step[t] = true;
    }
    auto claim = [&](uint32_t t, int layer) {
      if (layer < 0 || gradient_layer_[t] >= 0 || !read_by_step[t] ||
          !HasRole(iteration_, t, TensorRole::kGradient)) {
        return;
      }
      gradient_layer_[t] = layer;
      out_.gradients[static_cast<size_t>(layer)].tensors.push_back(t);
    };
    for (size_t k = out_.backward_begin; k < out_.step_begin; ++k) {
      for (uint32_t t : kernels()[k].writes) claim(t, LayerOf(k));
    }
    for (size_t k = out_.step_begin; k < kernels().size(); ++k) {
      int layer = -1;
      for (uint32_t t : ParametersOf(iteration_, kernels()[k])) {
        const int of = layer_of_tensor_[t];
        if (of < 0 || (layer >= 0 && of != layer)) {
          layer = -1;
          break;
        }
        layer = of;
      }
      for (uint32_t t : kernels()[k].reads) claim(t, layer);
    }
    for (LayerGradients& gradients : out_.gradients) {
      std::sort(gradients.tensors.begin(), gradients.tensors.end());
      PageSet pages;
      for (uint32_t t : gradients.tensors) {
        pages.AddRange(iteration_.tensors[t].address, iteration_.tensors[t].size,
                       /*whole_pages_only=*/true);
      }
      gradients.bytes = pages.bytes();
    }
  }

  Nanos RemoteTime(size_t k, const std::vector<uint32_t>& remote) const {
    return KernelTimeWithRemote(kernels()[k], remote, device_);
  }
  Nanos RemoteTime(size_t k, int layer) const {
    return RemoteTime(k, out_.layers[static_cast<size_t>(layer)].parameters);
  }

  // How long kernel k's accesses to `remote` (sorted tensor indices) hold
  // the host-to-device lane when they are remote: their reads at the remote
  // read rate, and on a half-duplex link (one lane) their writes too.
  Nanos LaneTime(size_t k, const std::vector<uint32_t>& remote) const {
    const GraphKernel& kernel = kernels()[k];
    auto bytes = [&remote](const std::vector<uint32_t>& tensors,
                           const std::vector<TensorTouch>& touches) {
      uint64_t total = 0;
      for (size_t i = 0; i < tensors.size() && i < touches.size(); ++i) {
        if (std::binary_search(remote.begin(), remote.end(), tensors[i])) {
          total += touches[i].bytes;
        }
      }
      return static_cast<double>(total);
    };
    const LinkConfig& link = device_.link;
    double ns = bytes(kernel.reads, kernel.read_touches) * 1e9 / link.remote_read_rate();
    if (!link.full_duplex) {
      ns += bytes(kernel.writes, kernel.write_touches) * 1e9 / link.remote_write_rate();
    }
    return std::llround(ns);
  }
  Nanos LaneTime(size_t k, int layer) const {
    return LaneTime(k, out_.layers[static_cast<size_t>(layer)].parameters);
  }

  // The parameter-free kernels between two layers' go to the one before
  // them in forward order; a tied layer's later use adds to its own time
  // and moves no boundary. A kernel named after a layer is that layer's
  // even if it reads no parameter (a convolution computing on a copy of its
  // weight in another layout).
  void AddForwardTimes() {
    int current = -1;
    for (size_t k = 0; k < out_.backward_begin; ++k) {
      const Nanos time = ComputeTime(kernels()[k], device_);
      const int layer = LayerOf(k);
      if (layer < 0) {
        if (current < 0) {
          out_.table.forward_before_first += time;
        } else {
          out_.table.layers[static_cast<size_t>(current)].forward_after += time;
        }
        continue;
      }
      LayerCosts& costs = out_.table.layers[static_cast<size_t>(layer)];
      costs.forward += time;
      costs.forward_from_host += RemoteTime(k, layer);
      costs.forward_link += LaneTime(k, layer);
      if (layer >= current) {
        current = layer;
        out_.layers[static_cast<size_t>(layer)].forward_end = k;
      }
    }
  }

  // The schedule runs a layer's backward_after just before its backward, so
  // the parameter-free kernels since the last layer kernel go to the next
  // layer kernel's layer, and those after the last one run last.
  void AddBackwardTimes() {
    Nanos pending = 0;
    for (size_t k = out_.backward_begin; k < out_.step_begin; ++k) {
      const Nanos time = ComputeTime(kernels()[k], device_);
      const int layer = LayerOf(k);
      if (layer < 0) {
        pending += time;
        continue;
      }
      LayerCosts& costs = out_.table.layers[static_cast<size_t>(layer)];
      LayerKernels& where = out_.layers[static_cast<size_t>(layer)];
      costs.backward_after += pending;
      pending = 0;
      costs.backward += time;
      costs.backward_from_host += RemoteTime(k, layer);
      costs.backward_link += LaneTime(k, layer);
      if (where.first_backward == kNoKernel) where.first_backward = k;
      where.last_backward = k;
    }
    out_.table.backward_before_first += pending;
  }

  // T_GBP: each layer's backward times with its gradients remote. A
  // backward kernel that touches a layer's gradients adds what making them
  // remote adds to it: to the layer's backward with its parameters on the
  // device and with them remote if it is the layer's own kernel, to both
  // alike if not (a wgrad named after no layer, whose parameters are none).
  void AddGradientTimes() {
    for (size_t l = 0; l < out_.gradients.size(); ++l) {
      out_.gradients[l].backward = out_.table.layers[l].backward;
      out_.gradients[l].backward_from_host = out_.table.layers[l].backward_from_host;
    }
    for (size_t k = out_.backward_begin; k < out_.step_begin; ++k) {
      const GraphKernel& kernel = kernels()[k];
      std::vector<int> layers;  // whose gradients it touches
      for (const std::vector<uint32_t>* list : {&kernel.reads, &kernel.writes}) {
        for (uint32_t t : *list) {
          if (gradient_layer_[t] >= 0) layers.push_back(gradient_layer_[t]);
        }
      }
      std::sort(layers.begin(), layers.end());
      layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
      const int own = LayerOf(k);
      for (int layer : layers) {
        LayerGradients& gradients = out_.gradients[static_cast<size_t>(layer)];
        const Nanos local = ComputeTime(kernel, device_);
        const Nanos added = RemoteTime(k, gradients.tensors) - local;
        gradients.backward += added;
        gradients.link += LaneTime(k, gradients.tensors);
        if (own != layer) {
          gradients.backward_from_host += added;
          continue;
        }
        const std::vector<uint32_t>& parameters =
            out_.layers[static_cast<size_t>(layer)].parameters;
        std::vector<uint32_t> both;
        std::merge(parameters.begin(), parameters.end(), gradients.tensors.begin(),
                   gradients.tensors.end(), std::back_inserter(both));
        gradients.backward_from_host += RemoteTime(k, both) - RemoteTime(k, parameters);
      }
    }
  }

  // Whole pages, and one transfer per block they touch.
  void AddTransfers() {
    const double rate = device_.link.h2d_bytes_per_second;
    for (size_t l = 0; l < out_.layers.size(); ++l) {
      PageSet pages;
      for (uint32_t t : out_.layers[l].parameters) {
        pages.AddRange(iteration_.tensors[t].address, iteration_.tensors[t].size);
      }
      LayerCosts& costs = out_.table.layers[l];
      costs.parameter_bytes = pages.bytes();
      for (const auto& [block, mask] : pages.blocks()) {
        costs.transfer += device_.link.latency_ns +
                          std::llround(static_cast<double>(MaskBytes(mask)) * 1e9 / rate);
      }
    }
  }

  const IterationGraph& iteration_;
  const absl::flat_hash_map<uint32_t, std::string>& names_;
  const DeviceConfig& device_;
  ProgramLayers out_;
  std::vector<int> layer_of_tensor_;  // -1: not a parameter of any layer
  std::vector<int> gradient_layer_;   // -1: not a layer's parameter gradient
  absl::flat_hash_map<std::string, int> prefix_owner_;
};

}  // namespace

Nanos KernelTimeWithRemote(const GraphKernel& kernel, const std::vector<uint32_t>& remote,
                           const DeviceConfig& device) {
  const Nanos compute = ComputeTime(kernel, device) - KernelOverhead(device);
  if (remote.empty() || kernel.page_visits == 0) return compute + KernelOverhead(device);
  const LinkConfig& link = device.link;
  const double issuers = static_cast<double>(
      std::min<uint64_t>(static_cast<uint64_t>(device.access_streams()), kernel.page_visits));
  const double rounds = std::ceil(static_cast<double>(kernel.page_visits) / issuers);
  const double step = static_cast<double>(compute) / rounds;  // per visit, per issuer
  const double latency = static_cast<double>(link.remote_latency_ns);
  double added = 0;  // issuer time beyond the compute, per issuer
  double floor = 0;  // no stretch ends before its bytes have crossed
  auto add = [&](const std::vector<uint32_t>& tensors, const std::vector<TensorTouch>& touches,
                 double rate) {
    for (size_t i = 0; i < tensors.size() && i < touches.size(); ++i) {
      const TensorTouch& touch = touches[i];
      if (touch.page_visits == 0 ||
          !std::binary_search(remote.begin(), remote.end(), tensors[i])) {
        continue;
      }
      const double visits = static_cast<double>(touch.page_visits);
      const double on_link = static_cast<double>(touch.bytes) * 1e9 / rate;
      floor = std::max(floor, on_link + latency);
      if (visits >= issuers) {
        // Every issuer is soon waiting in the stretch: it runs on its own.
        const double local = visits * step / issuers;
        const double issuer_bound = visits * std::max(step, on_link / visits + latency) / issuers;
        added += std::max({local, on_link + latency, issuer_bound}) - local;
      } else {
        // A few issuers wait, the j-th for j visits' bytes and the round
        // trip, while the others take the rest of the cursor.
        added += visits *
                 std::max(0.0, latency + (visits + 1) / 2 * on_link / visits - step) / issuers;
      }
    }
  };
  add(kernel.reads, kernel.read_touches, link.remote_read_rate());
  add(kernel.writes, kernel.write_touches, link.remote_write_rate());
  return std::llround(std::max(static_cast<double>(compute) + added, floor)) +
         KernelOverhead(device);
}

absl::StatusOr<ProgramLayers> BuildLayerTable(
    const IterationGraph& iteration, const absl::flat_hash_map<uint32_t, std::string>& names,
    const DeviceConfig& device) {
  return TableBuilder(iteration, names, device).Build();
}

}  // namespace umlab
