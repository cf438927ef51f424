#include "workloads/g10/g10_cnn_graph.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/g10/g10_graph_builder.h"
#include "workloads/g10/g10_torch_print.h"

namespace umlab {

namespace {

// Shape arithmetic saturates here; G10ElementBytes then rejects the size.
constexpr int64_t kSaturated = int64_t{1} << 62;

constexpr const char* kRecopy = kG10RecopyNet;

int64_t Mul(int64_t a, int64_t b) {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}

// ---------------------------------------------------------------------------
// Layers: G10's Model_Layer.

enum class LayerKind {
  kConv, kReLU, kMaxPool, kAvgPool, kLinear, kDropout, kBatchNorm, kAdd, kConcat, kScale
};

const char* KindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv: return "Conv2d";
    case LayerKind::kReLU: return "ReLU";
    case LayerKind::kMaxPool: return "MaxPool2d";
    case LayerKind::kAvgPool: return "AdaptiveAvgPool2d";
    case LayerKind::kLinear: return "Linear";
    case LayerKind::kDropout: return "Dropout";
    case LayerKind::kBatchNorm: return "BatchNorm2d";
    case LayerKind::kAdd: return "Add";
    case LayerKind::kConcat: return "Concat";
    case LayerKind::kScale: return "Scale";
  }
  return "?";
}

struct Shape {
  int64_t n = 0, c = 0, h = 0, w = 0;
};

struct Layer {
  LayerKind kind = LayerKind::kConv;
  std::string name;  // module path, e.g. layer1.0.conv1; inserted layers: <block>.add
  int line = 0;
  // Operator parameters.
  int64_t in_channels = 0, out_channels = 0;         // Conv2d
  int64_t kernel_h = 1, kernel_w = 1;                // Conv2d, MaxPool2d
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t out_h = 0, out_w = 0;                      // AdaptiveAvgPool2d
  int64_t in_features = 0, out_features = 0;         // Linear
  int64_t num_features = 0;                          // BatchNorm2d
  bool bias = false;                                 // Linear
  bool inplace = false;                              // ReLU, Dropout
  bool running_stats = false;                        // BatchNorm2d
  // Graph: layer ids, in the order G10 appends them.
  std::vector<int> prev, next;
  int scale_ref = -1;  // Scale: the layer whose output gives its height and width
  // G10's N, C, H, W: the layer's input.
  bool has_shape = false;
  Shape in;
  Shape out;
  // Tensor indices; -1: none.
  int input = -1, output = -1, d_input = -1, d_output = -1;
  int weight = -1, d_weight = -1, bias_tensor = -1, d_bias = -1;
  int scale_shift = -1, d_scale_shift = -1, running_mean = -1, running_var = -1;
  int mean = -1, var = -1, v1 = -1, v2 = -1, d_mean = -1, d_var = -1, d_v1 = -1, d_v2 = -1;
  int mask = -1;
  std::vector<int> other_inputs, other_d_inputs, other_d_outputs;
};

// Reads an operator's arguments, rejecting anything G10's grammar lacks.
class OperatorArgs {
 public:
  OperatorArgs(const TorchModule& module, const std::string& source)
      : module_(module), source_(source) {}

  absl::Status Check(size_t positional, std::initializer_list<const char*> keys) const {
    size_t seen = 0;
    for (const TorchArg& arg : module_.args) {
      if (arg.key.empty()) {
        ++seen;
        continue;
      }
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return arg.key == k; })) {
        return Error(absl::StrFormat("%s argument '%s' is not in G10's grammar (G10 cannot model "
                                     "it); remove it or use a model G10 ships",
                                     module_.type, arg.key));
      }
    }
    if (seen != positional) {
      return Error(absl::StrFormat("%s takes %d positional argument(s), found %d; %s",
                                   module_.type, positional, seen, kRecopy));
    }
    return absl::OkStatus();
  }

  // The i-th positional integer.
  absl::Status Positional(size_t index, int64_t& value) const {
    size_t seen = 0;
    for (const TorchArg& arg : module_.args) {
      if (!arg.key.empty()) continue;
      if (seen++ == index) return AsInt(arg.value, absl::StrCat("argument ", index + 1), value);
    }
    return Error(absl::StrFormat("%s lacks positional argument %d", module_.type, index + 1));
  }

  // An integer or an (a, b) pair; `fallback` when absent (nullptr: required).
  absl::Status Pair(const char* key, const int64_t* fallback, int64_t& a, int64_t& b) const {
    const TorchValue* value = Find(key);
    if (value == nullptr) return Missing(key, fallback, a, b);
    if (value->kind == TorchValue::Kind::kInt) {
      a = b = value->first;
      return absl::OkStatus();
    }
    if (value->kind == TorchValue::Kind::kPair) {
      a = value->first;
      b = value->second;
      return absl::OkStatus();
    }
    return Error(absl::StrFormat("%s's %s must be an integer or (a, b)", module_.type, key));
  }

  // A square window: an integer, or a pair of equal values.
  absl::Status Square(const char* key, const int64_t* fallback, int64_t& value) const {
    int64_t other = 0;
    if (absl::Status s = Pair(key, fallback, value, other); !s.ok()) return s;
    if (value != other) {
      return Error(absl::StrFormat("%s's %s=(%d, %d) is not square; G10 models square pooling "
                                   "windows only",
                                   module_.type, key, value, other));
    }
    return absl::OkStatus();
  }

  absl::Status Int(const char* key, int64_t& value) const {
    const TorchValue* found = Find(key);
    if (found == nullptr) {
      return Error(absl::StrFormat("%s needs %s=; %s", module_.type, key, kRecopy));
    }
    return AsInt(*found, key, value);
  }

  absl::Status Bool(const char* key, bool fallback, bool& value) const {
    const TorchValue* found = Find(key);
    if (found == nullptr) {
      value = fallback;
      return absl::OkStatus();
    }
    if (found->kind != TorchValue::Kind::kBool) {
      return Error(absl::StrFormat("%s's %s must be True or False", module_.type, key));
    }
    value = found->flag;
    return absl::OkStatus();
  }

 private:
  const TorchValue* Find(const char* key) const {
    for (const TorchArg& arg : module_.args) {
      if (arg.key == key) return &arg.value;
    }
    return nullptr;
  }

  absl::Status Missing(const char* key, const int64_t* fallback, int64_t& a, int64_t& b) const {
    if (fallback == nullptr) {
      return Error(absl::StrFormat("%s needs %s=; %s", module_.type, key, kRecopy));
    }
    a = b = *fallback;
    return absl::OkStatus();
  }

  absl::Status AsInt(const TorchValue& value, const std::string& what, int64_t& out) const {
    if (value.kind != TorchValue::Kind::kInt) {
      return Error(absl::StrFormat("%s's %s must be an integer", module_.type, what));
    }
    out = value.first;
    return absl::OkStatus();
  }

  absl::Status Error(const std::string& what) const {
    return G10LineError(source_, module_.line, what);
  }

  const TorchModule& module_;
  const std::string& source_;
};

// One InceptionX block as G10 wires it. Entries are the block's BasicConv2d
// children by print position.
struct InceptionBranch {
  std::vector<int> chain;  // entries run in sequence
  std::vector<int> split;  // none, or two entries fed by the chain's end and joined by a Concat
  bool pool = false;       // a MaxPool2d heads the branch (before the chain, or alone)
};

struct InceptionShape {
  std::string type;
  int entries = 0;
  int64_t pool_kernel = 3, pool_stride = 1, pool_pad = 0;
  std::vector<InceptionBranch> branches;
};

// G10's src/ast.cc, UserBlock::Analysis, is_inception: the first branch
// always continues from the block's input by the default chain.
const std::vector<InceptionShape>& InceptionShapes() {
  static const auto* shapes = new std::vector<InceptionShape>{
      {"InceptionA", 7, 3, 1, 1, {{{0}, {}, false}, {{1, 2}, {}, false},
                                  {{3, 4, 5}, {}, false}, {{6}, {}, true}}},
      {"InceptionB", 4, 3, 2, 0, {{{0}, {}, false}, {{1, 2, 3}, {}, false}, {{}, {}, true}}},
      {"InceptionC", 10, 3, 1, 1, {{{0}, {}, false}, {{1, 2, 3}, {}, false},
                                   {{4, 5, 6, 7, 8}, {}, false}, {{9}, {}, true}}},
      {"InceptionD", 6, 3, 2, 0, {{{0, 1}, {}, false}, {{2, 3, 4, 5}, {}, false},
                                  {{}, {}, true}}},
      {"InceptionE", 9, 3, 1, 1, {{{0}, {}, false}, {{1}, {2, 3}, false},
                                  {{4, 5}, {6, 7}, false}, {{8}, {}, true}}},
  };
  return *shapes;
}

class CnnBuilder {
 public:
  CnnBuilder(const std::string& source, int batch, int input_size, G10Model& model)
      : source_(source), batch_(batch), input_size_(input_size), model_(model),
        builder_(model) {}

  absl::Status Build(const std::string& text) {
    TorchModule root;
    if (absl::Status s = ParseTorchPrint(text, source_, root); !s.ok()) return s;
    std::vector<int> produced;
    if (absl::Status s = Analyze(root, "", produced); !s.ok()) return s;
    if (order_.empty()) {
      return G10LineError(source_, root.line,
                          absl::StrFormat("model %s has no operators; %s", root.type, kRecopy));
    }
    if (absl::Status s = ComputeShapes(); !s.ok()) return s;
    if (absl::Status s = CreateTensors(); !s.ok()) return s;
    if (absl::Status s = LinkGradients(); !s.ok()) return s;
    ScheduleKernels();
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const Layer& layer, const std::string& what) const {
    return G10LineError(source_, layer.line, absl::StrCat(layer.name, ": ", what));
  }

  // ---- Structure (G10's parser actions and UserBlock::Analysis) ----------

  int NewLayer(LayerKind kind, std::string name, int line) {
    Layer layer;
    layer.kind = kind;
    layer.name = std::move(name);
    layer.line = line;
    layers_.push_back(std::move(layer));
    return static_cast<int>(layers_.size()) - 1;
  }

  void Link(int from, int to) {
    layers_[from].next.push_back(to);
    layers_[to].prev.push_back(from);
  }

  void InsertBefore(int anchor, int layer) {
    order_.insert(std::find(order_.begin(), order_.end(), anchor), layer);
  }

  void InsertAfter(int anchor, int layer) {
    order_.insert(std::find(order_.begin(), order_.end(), anchor) + 1, layer);
  }

  // Appends the module's layers to `produced` (and to G10's layer order),
  // then rewires the block if G10 hard-codes its name.
  absl::Status Analyze(const TorchModule& module, const std::string& path,
                       std::vector<int>& produced) {
    if (module.is_operator) return AddOperator(module, path, produced);
    const size_t start = order_.size();
    std::vector<std::vector<int>> entries;
    for (const TorchModule& child : module.children) {
      entries.emplace_back();
      const std::string child_path =
          path.empty() ? child.label : absl::StrCat(path, ".", child.label);
      if (absl::Status s = Analyze(child, child_path, entries.back()); !s.ok()) return s;
    }
    absl::Status status = absl::OkStatus();
    if (module.type == "Bottleneck") {
      status = WireResidual(module, path, start, entries, 7);
    } else if (module.type == "BasicBlock") {
      status = WireResidual(module, path, start, entries, 5);
    } else if (module.type == "SENetUnit") {
      status = WireSeUnit(module, path, start, entries);
    } else {
      for (const InceptionShape& shape : InceptionShapes()) {
        if (module.type == shape.type) status = WireInception(module, path, start, entries, shape);
      }
    }
    if (!status.ok()) return status;
    produced.insert(produced.end(), order_.begin() + static_cast<std::ptrdiff_t>(start),
                    order_.end());
    return absl::OkStatus();
  }

  absl::Status AddOperator(const TorchModule& module, const std::string& path,
                           std::vector<int>& produced) {
    const int id = NewLayer(LayerKind::kConv, path, module.line);
    Layer layer = layers_[id];
    const OperatorArgs args(module, source_);
    const int64_t zero = 0, one = 1;
    absl::Status s = absl::OkStatus();
    if (module.type == "Conv2d") {
      layer.kind = LayerKind::kConv;
      bool bias = true;  // no tensor: G10 allocates none for a conv bias
      s.Update(args.Check(2, {"kernel_size", "stride", "padding", "bias"}));
      if (s.ok()) s.Update(args.Positional(0, layer.in_channels));
      if (s.ok()) s.Update(args.Positional(1, layer.out_channels));
      if (s.ok()) s.Update(args.Pair("kernel_size", nullptr, layer.kernel_h, layer.kernel_w));
      if (s.ok()) s.Update(args.Pair("stride", &one, layer.stride_h, layer.stride_w));
      if (s.ok()) s.Update(args.Pair("padding", &zero, layer.pad_h, layer.pad_w));
      if (s.ok()) s.Update(args.Bool("bias", true, bias));
    } else if (module.type == "ReLU") {
      layer.kind = LayerKind::kReLU;
      s.Update(args.Check(0, {"inplace"}));
      if (s.ok()) s.Update(args.Bool("inplace", false, layer.inplace));
    } else if (module.type == "MaxPool2d") {
      layer.kind = LayerKind::kMaxPool;
      bool ceil_mode = false;  // G10 ignores ceil_mode and dilation
      int64_t dilation = 1;
      s.Update(args.Check(0, {"kernel_size", "stride", "padding", "dilation", "ceil_mode"}));
      if (s.ok()) s.Update(args.Square("kernel_size", nullptr, layer.kernel_h));
      if (s.ok()) s.Update(args.Square("stride", &layer.kernel_h, layer.stride_h));
      if (s.ok()) s.Update(args.Square("padding", &zero, layer.pad_h));
      if (s.ok()) s.Update(args.Square("dilation", &one, dilation));
      if (s.ok()) s.Update(args.Bool("ceil_mode", false, ceil_mode));
      layer.kernel_w = layer.kernel_h;
      layer.stride_w = layer.stride_h;
      layer.pad_w = layer.pad_h;
    } else if (module.type == "AdaptiveAvgPool2d") {
      layer.kind = LayerKind::kAvgPool;
      s.Update(args.Check(0, {"output_size"}));
      if (s.ok()) s.Update(args.Pair("output_size", nullptr, layer.out_h, layer.out_w));
    } else if (module.type == "Linear") {
      layer.kind = LayerKind::kLinear;
      s.Update(args.Check(0, {"in_features", "out_features", "bias"}));
      if (s.ok()) s.Update(args.Int("in_features", layer.in_features));
      if (s.ok()) s.Update(args.Int("out_features", layer.out_features));
      if (s.ok()) s.Update(args.Bool("bias", true, layer.bias));
    } else if (module.type == "Dropout") {
      layer.kind = LayerKind::kDropout;
      s.Update(args.Check(0, {"p", "inplace"}));
      if (s.ok()) s.Update(args.Bool("inplace", false, layer.inplace));
    } else {  // BatchNorm2d
      layer.kind = LayerKind::kBatchNorm;
      bool affine = true;  // G10 allocates scale and shift either way
      s.Update(args.Check(1, {"eps", "momentum", "affine", "track_running_stats"}));
      if (s.ok()) s.Update(args.Positional(0, layer.num_features));
      if (s.ok()) s.Update(args.Bool("affine", true, affine));
      if (s.ok()) s.Update(args.Bool("track_running_stats", true, layer.running_stats));
    }
    if (!s.ok()) return s;
    const bool window = layer.kind == LayerKind::kConv || layer.kind == LayerKind::kMaxPool;
    if ((window && (layer.kernel_h == 0 || layer.kernel_w == 0 || layer.stride_h == 0 ||
                    layer.stride_w == 0)) ||
        (layer.kind == LayerKind::kConv && (layer.in_channels == 0 || layer.out_channels == 0)) ||
        (layer.kind == LayerKind::kLinear && (layer.in_features == 0 || layer.out_features == 0)) ||
        (layer.kind == LayerKind::kAvgPool && (layer.out_h == 0 || layer.out_w == 0))) {
      return Error(layer, absl::StrFormat("%s has a zero size, kernel or stride; %s",
                                          module.type, kRecopy));
    }
    if (order_.empty()) {
      // G10 starts the data flow at the first layer: (batch, in_channels,
      // input_H, input_W), and it must be a convolution.
      if (layer.kind != LayerKind::kConv) {
        return Error(layer, absl::StrFormat("the first layer is a %s, but G10 needs a Conv2d "
                                            "there (it feeds the input images)",
                                            module.type));
      }
      layer.has_shape = true;
      layer.in = {batch_, layer.in_channels, input_size_, input_size_};
      layers_[id] = std::move(layer);
    } else {
      layers_[id] = std::move(layer);
      Link(order_.back(), id);  // G10's default: chained to the layer printed before
    }
    order_.push_back(id);
    produced.push_back(id);
    return absl::OkStatus();
  }

  absl::StatusOr<int> BlockInput(const TorchModule& module, const std::string& path,
                                 size_t start) const {
    if (start == 0) {
      return G10LineError(source_, module.line,
                          absl::StrFormat("%s: a %s cannot open the model; G10 joins it to the "
                                          "layer printed before it",
                                          path, module.type));
    }
    return order_[start - 1];
  }

  absl::Status EntryError(const TorchModule& module, const std::string& path,
                          const std::string& what) const {
    return G10LineError(source_, module.line,
                        absl::StrFormat("%s (%s): %s; G10 hard-codes this block's wiring by "
                                        "position, so it cannot be imported",
                                        path, module.type, what));
  }

  // ResNet's Bottleneck (7 entries) and BasicBlock (5): an Add after the
  // main path; with a downsample Sequential as an extra last entry, the
  // downsample path starts from the block's input and the Add joins the two
  // paths, else the Add joins the block's input and the main path.
  absl::Status WireResidual(const TorchModule& module, const std::string& path, size_t start,
                            const std::vector<std::vector<int>>& entries, int main_entries) {
    const int count = static_cast<int>(entries.size());
    if (count != main_entries && count != main_entries + 1) {
      return EntryError(module, path,
                        absl::StrFormat("it has %d entries, but G10 wires %d (or %d with a "
                                        "downsample last)",
                                        count, main_entries, main_entries + 1));
    }
    for (int i = 0; i < main_entries; ++i) {
      if (entries[i].size() != 1) {
        return EntryError(module, path,
                          absl::StrFormat("entry '%s' is %d layers, but G10 expects one operator",
                                          module.children[i].label, entries[i].size()));
      }
    }
    const bool downsample = count == main_entries + 1;
    if (downsample && entries[main_entries].size() != 2) {
      return EntryError(module, path,
                        absl::StrFormat("its downsample is %d layers, but G10 expects a Conv2d "
                                        "and a BatchNorm2d",
                                        entries[main_entries].size()));
    }
    absl::StatusOr<int> input = BlockInput(module, path, start);
    if (!input.ok()) return input.status();
    const int main_last = entries[main_entries - 1][0];
    const int add = NewLayer(LayerKind::kAdd, path + ".add", module.line);
    order_.push_back(add);
    if (downsample) {
      const int first = entries[main_entries][0], last = entries[main_entries][1];
      layers_[first].prev.clear();  // it was chained to the main path's end
      layers_[main_last].next.clear();
      Link(*input, first);
      Link(main_last, add);
      Link(last, add);
    } else {
      Link(*input, add);
      Link(main_last, add);
    }
    return absl::OkStatus();
  }

  // Inception-v3's blocks; see InceptionShapes().
  absl::Status WireInception(const TorchModule& module, const std::string& path, size_t start,
                             const std::vector<std::vector<int>>& entries,
                             const InceptionShape& shape) {
    if (static_cast<int>(entries.size()) != shape.entries) {
      return EntryError(module, path,
                        absl::StrFormat("it has %d entries, but G10 wires %d", entries.size(),
                                        shape.entries));
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].size() != 3) {
        return EntryError(module, path,
                          absl::StrFormat("entry '%s' is %d layers, but G10 counts 3 per "
                                          "BasicConv2d (conv, bn, relu)",
                                          module.children[i].label, entries[i].size()));
      }
    }
    absl::StatusOr<int> input = BlockInput(module, path, start);
    if (!input.ok()) return input.status();
    auto first = [&](int entry) { return entries[entry].front(); };
    auto last = [&](int entry) { return entries[entry].back(); };

    // The default chain joined entries in print order; keep only the joins
    // within a branch (chain order, and the chain's end to its first split).
    std::vector<int> successor(entries.size(), -1);
    for (const InceptionBranch& branch : shape.branches) {
      for (size_t k = 0; k + 1 < branch.chain.size(); ++k) {
        successor[branch.chain[k]] = branch.chain[k + 1];
      }
      if (!branch.split.empty()) successor[branch.chain.back()] = branch.split[0];
    }
    for (size_t j = 0; j + 1 < entries.size(); ++j) {
      if (successor[j] == static_cast<int>(j) + 1) continue;
      layers_[last(static_cast<int>(j))].next.clear();
      layers_[first(static_cast<int>(j) + 1)].prev.clear();
    }

    // New layers, at the positions G10 inserts them.
    const size_t branches = shape.branches.size();
    std::vector<int> pool(branches, -1), inner(branches, -1);
    for (size_t b = 0; b < branches; ++b) {
      const InceptionBranch& branch = shape.branches[b];
      if (!branch.split.empty()) {
        inner[b] = NewLayer(LayerKind::kConcat, absl::StrCat(path, ".concat", b), module.line);
        InsertAfter(last(branch.split.back()), inner[b]);
      }
      if (branch.pool) {
        pool[b] = NewLayer(LayerKind::kMaxPool, absl::StrCat(path, ".pool", b), module.line);
        Layer& layer = layers_[pool[b]];
        layer.kernel_h = layer.kernel_w = shape.pool_kernel;
        layer.stride_h = layer.stride_w = shape.pool_stride;
        layer.pad_h = layer.pad_w = shape.pool_pad;
        if (branch.chain.empty()) {
          order_.push_back(pool[b]);
        } else {
          InsertBefore(first(branch.chain[0]), pool[b]);
        }
      }
    }
    const int concat = NewLayer(LayerKind::kConcat, path + ".concat", module.line);
    order_.push_back(concat);

    // Edges, in the order G10 appends them to each list.
    for (size_t b = 1; b < branches; ++b) {
      Link(*input, pool[b] >= 0 ? pool[b] : first(shape.branches[b].chain[0]));
    }
    for (size_t b = 0; b < branches; ++b) {
      const InceptionBranch& branch = shape.branches[b];
      if (pool[b] >= 0 && !branch.chain.empty()) Link(pool[b], first(branch.chain[0]));
      if (!branch.split.empty()) {
        Link(last(branch.chain.back()), first(branch.split[1]));
        Link(last(branch.split[0]), inner[b]);
        Link(last(branch.split[1]), inner[b]);
      }
    }
    for (size_t b = 0; b < branches; ++b) {
      const InceptionBranch& branch = shape.branches[b];
      const int end = inner[b] >= 0        ? inner[b]
                      : branch.chain.empty() ? pool[b]
                                             : last(branch.chain.back());
      Link(end, concat);
    }
    return absl::OkStatus();
  }

  // SENet's SENetUnit: body (8 layers), se (5), [identity_conv (2),] activ
  // (1). A Scale after the SE block and an Add before activ, which joins the
  // Scale with the unit's input, or with the identity conv, which then
  // starts from the unit's input. The Scale takes its height and width from
  // that other Add input.
  absl::Status WireSeUnit(const TorchModule& module, const std::string& path, size_t start,
                          const std::vector<std::vector<int>>& entries) {
    const size_t count = entries.size();
    if (count != 3 && count != 4) {
      return EntryError(module, path,
                        absl::StrFormat("it has %d entries, but G10 wires 3 (body, se, activ) "
                                        "or 4 (body, se, identity_conv, activ)",
                                        count));
    }
    const bool identity = count == 4;
    const std::vector<size_t> expected =
        identity ? std::vector<size_t>{8, 5, 2, 1} : std::vector<size_t>{8, 5, 1};
    for (size_t i = 0; i < count; ++i) {
      if (entries[i].size() != expected[i]) {
        return EntryError(module, path,
                          absl::StrFormat("entry '%s' is %d layers, but G10 counts %d",
                                          module.children[i].label, entries[i].size(),
                                          expected[i]));
      }
    }
    absl::StatusOr<int> input = BlockInput(module, path, start);
    if (!input.ok()) return input.status();
    const int se_end = entries[1].back();
    const int activ = entries.back()[0];
    const int scale = NewLayer(LayerKind::kScale, path + ".scale", module.line);
    const int add = NewLayer(LayerKind::kAdd, path + ".add", module.line);
    layers_[se_end].next.clear();
    layers_[activ].prev.clear();
    if (identity) {
      const int conv = entries[2][0], bn = entries[2][1];
      InsertBefore(conv, scale);
      InsertBefore(activ, add);
      layers_[conv].prev.clear();
      layers_[bn].next.clear();
      Link(se_end, scale);
      Link(scale, add);
      Link(bn, add);
      Link(*input, conv);
      Link(add, activ);
      layers_[scale].scale_ref = bn;
    } else {
      InsertBefore(activ, scale);
      InsertBefore(activ, add);
      Link(se_end, scale);
      Link(scale, add);
      Link(*input, add);
      Link(add, activ);
      layers_[scale].scale_ref = *input;
    }
    return absl::OkStatus();
  }

  // ---- Shapes (G10's layer_pre_pass_datasize, give_next_layer_size) -------

  static int64_t Window(int64_t size, int64_t kernel, int64_t pad, int64_t stride) {
    const int64_t span = size - kernel + 2 * pad;
    return span < 0 ? 0 : span / stride + 1;
  }

  absl::StatusOr<Shape> OutputOf(int id, int depth = 0) const {
    const Layer& layer = layers_[id];
    if (!layer.has_shape || depth > 2) {
      return Error(layer, "its input shape is needed before G10 computes it; the block "
                          "wiring is broken");
    }
    Shape s = layer.in;
    switch (layer.kind) {
      case LayerKind::kConv:
        if (s.c != layer.in_channels) {
          return Error(layer, absl::StrFormat("Conv2d takes %d channels but its input has %d "
                                              "(G10 propagates shapes in print order)",
                                              layer.in_channels, s.c));
        }
        s.c = layer.out_channels;
        s.h = Window(s.h, layer.kernel_h, layer.pad_h, layer.stride_h);
        s.w = Window(s.w, layer.kernel_w, layer.pad_w, layer.stride_w);
        break;
      case LayerKind::kMaxPool:
        s.h = Window(s.h, layer.kernel_h, layer.pad_h, layer.stride_h);
        s.w = Window(s.w, layer.kernel_w, layer.pad_w, layer.stride_w);
        break;
      case LayerKind::kAvgPool:
        s.h = layer.out_h;
        s.w = layer.out_w;
        break;
      case LayerKind::kLinear: {
        const int64_t values = Mul(Mul(s.c, s.h), s.w);
        if (values % layer.in_features != 0) {
          return Error(layer, absl::StrFormat("Linear takes %d features but its input has %d "
                                              "values per sample",
                                              layer.in_features, values));
        }
        s.c = Mul(values / layer.in_features, layer.out_features);
        s.h = s.w = 1;
        break;
      }
      case LayerKind::kScale: {
        absl::StatusOr<Shape> ref = OutputOf(layer.scale_ref, depth + 1);
        if (!ref.ok()) return ref.status();
        s.h = ref->h;
        s.w = ref->w;
        break;
      }
      default:  // ReLU, Dropout, BatchNorm2d, Add, Concat keep the shape
        break;
    }
    if (s.h <= 0 || s.w <= 0) {
      return Error(layer, absl::StrFormat("the %dx%d input is smaller than the window; the "
                                          "input size (%d) or a stride is wrong",
                                          layer.in.h, layer.in.w, input_size_));
    }
    return s;
  }

  absl::Status CheckSize(const Layer& layer, const Shape& s) const {
    if (G10ElementBytes({s.n, s.c, s.h, s.w}) > kG10MaxTensorBytes) {
      return Error(layer, "a tensor would exceed 256 TiB; a size is corrupt");
    }
    return absl::OkStatus();
  }

  absl::Status ComputeShapes() {
    for (size_t i = 1; i < order_.size(); ++i) {
      const int id = order_[i];
      if (layers_[id].prev.empty()) {
        return Error(layers_[id], "it has no input; the block wiring is broken");
      }
      absl::StatusOr<Shape> first = OutputOf(layers_[id].prev[0]);
      if (!first.ok()) return first.status();
      Shape in = *first;
      if (layers_[id].kind == LayerKind::kConcat) {
        in.c = 0;
        for (int p : layers_[id].prev) {
          absl::StatusOr<Shape> part = OutputOf(p);
          if (!part.ok()) return part.status();
          if (part->h != first->h || part->w != first->w) {
            return Error(layers_[id],
                         absl::StrFormat("Concat joins %dx%d (%s) and %dx%d (%s) images",
                                         first->h, first->w, layers_[layers_[id].prev[0]].name,
                                         part->h, part->w, layers_[p].name));
          }
          in.c = part->c > kSaturated - in.c ? kSaturated : in.c + part->c;
        }
      } else if (layers_[id].kind == LayerKind::kAdd) {
        for (int p : layers_[id].prev) {
          absl::StatusOr<Shape> part = OutputOf(p);
          if (!part.ok()) return part.status();
          if (part->c != in.c || part->h != in.h || part->w != in.w) {
            return Error(layers_[id],
                         absl::StrFormat("Add joins (%d, %d, %d) from %s and (%d, %d, %d) from "
                                         "%s; the block's shapes disagree",
                                         in.c, in.h, in.w, layers_[layers_[id].prev[0]].name,
                                         part->c, part->h, part->w, layers_[p].name));
          }
        }
      }
      Layer& layer = layers_[id];
      layer.in = in;
      layer.has_shape = true;
      if (layer.kind == LayerKind::kBatchNorm && layer.num_features != in.c) {
        return Error(layer, absl::StrFormat("BatchNorm2d(%d) gets %d channels",
                                            layer.num_features, in.c));
      }
    }
    for (int id : order_) {
      absl::StatusOr<Shape> out = OutputOf(id);
      if (!out.ok()) return out.status();
      layers_[id].out = *out;
      if (absl::Status s = CheckSize(layers_[id], layers_[id].in); !s.ok()) return s;
      if (absl::Status s = CheckSize(layers_[id], layers_[id].out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // ---- Tensors (G10's layer_first_pass_dataflow) --------------------------

  static uint64_t Bytes(const Shape& s) { return G10ElementBytes({s.n, s.c, s.h, s.w}); }

  int NewTensor(uint64_t raw_bytes, const Layer& layer, const char* role, bool global = false) {
    if (raw_bytes > kG10MaxTensorBytes && size_error_.ok()) {
      size_error_ = Error(layer, absl::StrCat("its ", role, " would exceed 256 TiB; a size is "
                                              "corrupt"));
    }
    return builder_.NewTensor(raw_bytes, global, absl::StrCat(layer.name, " ", role));
  }

  absl::StatusOr<int> OutputTensorOf(const Layer& layer, int producer) const {
    const int tensor = layers_[producer].output;
    if (tensor < 0) {
      return Error(layer, absl::StrFormat("its input %s comes later in G10's layer order; the "
                                          "block wiring is broken",
                                          layers_[producer].name));
    }
    return tensor;
  }

  absl::Status CreateTensors() {
    for (size_t position = 0; position < order_.size(); ++position) {
      Layer& layer = layers_[order_[position]];
      const Shape& s = layer.in;
      const uint64_t activation = Bytes(s);
      if (position == 0) {
        layer.input = NewTensor(activation, layer, "input images");
      } else {
        absl::StatusOr<int> input = OutputTensorOf(layer, layer.prev[0]);
        if (!input.ok()) return input.status();
        layer.input = *input;
      }
      switch (layer.kind) {
        case LayerKind::kConv: {
          const uint64_t weight = G10ElementBytes({layer.out_channels, s.c, layer.kernel_h,
                                                   layer.kernel_w});
          layer.output = NewTensor(Bytes(layer.out), layer, "output");
          layer.weight = NewTensor(weight, layer, "weight", /*global=*/true);
          layer.d_weight = NewTensor(weight, layer, "weight gradient");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          break;
        }
        case LayerKind::kReLU:
          layer.output = layer.inplace ? layer.input : NewTensor(activation, layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          break;
        case LayerKind::kMaxPool:
        case LayerKind::kAvgPool:
          layer.output = NewTensor(Bytes(layer.out), layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          break;
        case LayerKind::kDropout:
          layer.mask = NewTensor(activation, layer, "mask");
          layer.output = layer.inplace ? layer.input : NewTensor(activation, layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          break;
        case LayerKind::kLinear: {
          const uint64_t weight = G10ElementBytes({layer.in_features, layer.out_features});
          layer.weight = NewTensor(weight, layer, "weight", /*global=*/true);
          layer.output = NewTensor(Bytes(layer.out), layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          layer.d_weight = NewTensor(weight, layer, "weight gradient");
          if (layer.bias) {
            const uint64_t bias = G10ElementBytes({layer.out_features});
            layer.bias_tensor = NewTensor(bias, layer, "bias", /*global=*/true);
            layer.d_bias = NewTensor(bias, layer, "bias gradient");
          }
          break;
        }
        case LayerKind::kBatchNorm: {
          const uint64_t channels = G10ElementBytes({s.c});
          layer.output = NewTensor(activation, layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          layer.scale_shift = NewTensor(2 * channels, layer, "scale and shift", /*global=*/true);
          layer.d_scale_shift = NewTensor(2 * channels, layer, "scale and shift gradient");
          // cuDNN's saved statistics and G10's backward scratch.
          layer.mean = NewTensor(channels, layer, "saved mean");
          layer.var = NewTensor(channels, layer, "saved variance");
          layer.v1 = NewTensor(activation, layer, "v1");
          layer.v2 = NewTensor(channels, layer, "v2");
          layer.d_mean = NewTensor(channels, layer, "saved mean gradient");
          layer.d_var = NewTensor(channels, layer, "saved variance gradient");
          layer.d_v1 = NewTensor(activation, layer, "v1 gradient");
          layer.d_v2 = NewTensor(channels, layer, "v2 gradient");
          if (layer.running_stats) {
            layer.running_mean = NewTensor(channels, layer, "running mean", /*global=*/true);
            layer.running_var = NewTensor(channels, layer, "running variance", /*global=*/true);
          }
          break;
        }
        case LayerKind::kAdd:
        case LayerKind::kConcat: {
          if (layer.prev.size() < 2) return Error(layer, "it joins fewer than two layers");
          const bool concat = layer.kind == LayerKind::kConcat;
          // G10 sizes each Concat input gradient by the producer's own input
          // channel count (its N, C, H, W), at the Concat's height and width.
          auto part = [&](int producer) {
            return G10ElementBytes({s.n, layers_[producer].in.c, s.h, s.w});
          };
          if (concat) layer.d_input = NewTensor(part(layer.prev[0]), layer, "input 0 gradient");
          for (size_t j = 1; j < layer.prev.size(); ++j) {
            absl::StatusOr<int> other = OutputTensorOf(layer, layer.prev[j]);
            if (!other.ok()) return other.status();
            layer.other_inputs.push_back(*other);
            if (concat) {
              layer.other_d_inputs.push_back(
                  NewTensor(part(layer.prev[j]), layer,
                            absl::StrCat("input ", j, " gradient").c_str()));
            }
          }
          // An Add's input gradients are its output gradient.
          layer.output = NewTensor(activation, layer, "output");
          break;
        }
        case LayerKind::kScale:
          layer.output = NewTensor(Bytes(layer.out), layer, "output");
          layer.d_input = NewTensor(activation, layer, "input gradient");
          break;
      }
    }
    return size_error_;
  }

  // Each layer's output gradient is its first consumer's input gradient
  // (an Add's output gradient; a Concat's gradient for that input); the
  // other consumers' ones are summed into it by Add_MultiGredient.
  absl::Status LinkGradients() {
    for (size_t position = order_.size(); position-- > 0;) {
      const int id = order_[position];
      if (position + 1 == order_.size()) {
        layers_[id].d_output = NewTensor(Bytes(layers_[id].out), layers_[id], "loss gradient");
        continue;
      }
      if (layers_[id].next.empty()) {
        return Error(layers_[id], "its output feeds nothing, so G10 would have no gradient for "
                                  "it; the block wiring is broken");
      }
      for (size_t k = 0; k < layers_[id].next.size(); ++k) {
        const Layer& consumer = layers_[layers_[id].next[k]];
        int gradient = consumer.d_input;
        if (consumer.kind == LayerKind::kAdd) {
          gradient = consumer.d_output;
        } else if (consumer.kind == LayerKind::kConcat) {
          const auto at = std::find(consumer.prev.begin(), consumer.prev.end(), id);
          const size_t index = static_cast<size_t>(at - consumer.prev.begin());
          gradient = index == 0                           ? consumer.d_input
                     : index <= consumer.other_d_inputs.size() ? consumer.other_d_inputs[index - 1]
                                                               : -1;
        }
        if (gradient < 0) {
          return Error(layers_[id],
                       absl::StrFormat("its consumer %s comes earlier in G10's layer order; the "
                                       "block wiring is broken",
                                       consumer.name));
        }
        if (k == 0) {
          layers_[id].d_output = gradient;
        } else {
          layers_[id].other_d_outputs.push_back(gradient);
        }
      }
    }
    return absl::OkStatus();
  }

  // ---- Kernels (G10's layer_second_pass_scheduling_kernels) ---------------

  void Kernel(const std::string& name, int position, const std::vector<int>& inputs,
              const std::vector<int>& outputs) {
    builder_.AddKernel(name, position, inputs, outputs);
  }

  void ScheduleKernels() {
    for (size_t i = 0; i < order_.size(); ++i) {
      const Layer& l = layers_[order_[i]];
      const int at = static_cast<int>(i);
      const std::string forward = absl::StrCat(KindName(l.kind), "_Forward");
      switch (l.kind) {
        case LayerKind::kConv:
          if (i == 0) Kernel("LoadData_A0", at, {}, {l.input});
          Kernel(forward, at, {l.input, l.weight}, {l.output});
          break;
        case LayerKind::kDropout:
          Kernel(forward, at, {l.input, l.mask}, {l.output});
          break;
        case LayerKind::kLinear:
          Kernel(forward, at, {l.input, l.weight, l.bias_tensor}, {l.output});
          break;
        case LayerKind::kBatchNorm:
          Kernel(forward, at, {l.input, l.scale_shift, l.running_mean, l.running_var},
                 {l.running_mean, l.running_var, l.output, l.mean, l.var, l.v1, l.v2});
          break;
        case LayerKind::kAdd:
        case LayerKind::kConcat: {
          std::vector<int> inputs = {l.input};
          inputs.insert(inputs.end(), l.other_inputs.begin(), l.other_inputs.end());
          Kernel(forward, at, inputs, {l.output});
          break;
        }
        default:  // ReLU, MaxPool2d, AdaptiveAvgPool2d, Scale
          Kernel(forward, at, {l.input}, {l.output});
          break;
      }
    }
    model_.forward_kernels = static_cast<int>(model_.kernels.size());
    const int last_at = static_cast<int>(order_.size()) - 1;
    const Layer& last = layers_[order_.back()];
    Kernel("makeLoss", last_at, {last.output}, {last.d_output});

    for (int at = last_at; at >= 0; --at) {
      const Layer& l = layers_[order_[at]];
      if (!l.other_d_outputs.empty()) {
        std::vector<int> inputs = {l.d_output};
        inputs.insert(inputs.end(), l.other_d_outputs.begin(), l.other_d_outputs.end());
        Kernel("Add_MultiGredient", at, inputs, {l.d_output});
      }
      switch (l.kind) {
        case LayerKind::kConv:
          Kernel("Conv2d_Backward_Weight", at, {l.d_output, l.input}, {l.d_weight});
          Kernel("Conv2d_Backward_Input", at, {l.d_output, l.weight}, {l.d_input});
          Kernel("Conv2d_Apply_Grad", at, {l.d_weight, l.weight}, {l.weight});
          break;
        case LayerKind::kReLU:
        case LayerKind::kMaxPool:
        case LayerKind::kAvgPool:
          Kernel(absl::StrCat(KindName(l.kind), "_Backward"), at, {l.input, l.d_output},
                 {l.d_input});
          break;
        case LayerKind::kDropout:
          Kernel("Dropout_Backward", at, {l.mask, l.d_output}, {l.d_input});
          break;
        case LayerKind::kLinear:
          if (l.bias) {
            Kernel("Linear_Backward_Bias", at, {l.d_output}, {l.d_bias});
            Kernel("Linear_Apply_Grad_Bias", at, {l.d_bias, l.bias_tensor}, {l.bias_tensor});
          }
          Kernel("Linear_Backward_Weight", at, {l.d_output, l.input}, {l.d_weight});
          Kernel("Linear_Backward_Input", at, {l.weight, l.d_output}, {l.d_input});
          Kernel("Linear_Apply_Grad_Weight", at, {l.d_weight, l.weight}, {l.weight});
          break;
        case LayerKind::kBatchNorm:
          Kernel("BatchNorm2d_Backward", at, {l.d_output, l.v1, l.v2, l.scale_shift},
                 {l.d_input, l.d_scale_shift, l.d_mean, l.d_var, l.d_v1, l.d_v2});
          Kernel("BatchNorm2d_Apply_Grad", at, {l.d_scale_shift, l.scale_shift},
                 {l.scale_shift});
          break;
        case LayerKind::kConcat: {
          std::vector<int> outputs = {l.d_input};
          outputs.insert(outputs.end(), l.other_d_inputs.begin(), l.other_d_inputs.end());
          Kernel("Concat_Backward", at, {l.d_output}, outputs);
          break;
        }
        case LayerKind::kScale:
          Kernel("Scale_Backward", at, {l.d_output}, {l.d_input});
          break;
        case LayerKind::kAdd:  // its output gradient is its inputs' gradient
          break;
      }
    }
  }

  const std::string& source_;
  const int64_t batch_;
  const int64_t input_size_;
  G10Model& model_;
  G10ModelBuilder builder_;
  std::vector<Layer> layers_;  // by layer id (creation order)
  std::vector<int> order_;     // G10's forward_layers: layer ids in forward order
  absl::Status size_error_;
};

}  // namespace

absl::StatusOr<G10Model> ParseG10CnnGraph(const std::string& text, const std::string& source,
                                          int batch, int input_size) {
  if (batch <= 0 || batch > (1 << 24)) {
    return absl::InvalidArgumentError("the batch size must be in 1..16777216");
  }
  if (input_size <= 0 || input_size > (1 << 16)) {
    return absl::InvalidArgumentError("the input size must be in 1..65536");
  }
  return BuildG10Model(G10GraphKind::kCnn, batch, [&](G10Model& model) {
    model.input_size = input_size;
    return CnnBuilder(source, batch, input_size, model).Build(text);
  });
}

}  // namespace umlab
