#include "workloads/g10_graph.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace umlab {

namespace {

constexpr uint64_t kPage = 4096;  // G10 rounds every tensor to whole 4 KB pages
constexpr int64_t kBatchDim = 99;  // G10's placeholder for the batch dimension
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;  // far above any real model
// Largest value a cudnn file may hold (ms or bytes): keeps ns and byte counts in range.
constexpr double kMaxFileValue = 1e12;

uint64_t RoundToPage(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

struct Token {
  std::string text;
  int line = 0;
};

// One operator of the transformer graph after SoftmaxBasic records are merged.
struct Op {
  int id = 0;
  std::string type;
  std::vector<int> inputs;                   // tensor ids, as written
  std::vector<std::vector<int64_t>> shapes;  // this record's shape per input
  int line = 0;
  // Filled while tensors are created.
  int output = -1;                  // tensor index
  std::vector<int> input_tensor;    // tensor index per input
  std::vector<int> input_grad;      // gradient tensor index per input, -1: none
  std::vector<int> d_outputs;       // gradients of the output, one per consumer edge
};

absl::Status LineError(const std::string& source, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", source, line, what));
}

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot open; %s", path, fix));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class TransformerBuilder {
 public:
  TransformerBuilder(const std::string& source, int batch, int border, G10Model& model)
      : source_(source), batch_(batch), border_(border), model_(model) {}

  absl::Status Build(const std::string& text) {
    Tokenize(text);
    if (absl::Status s = ReadRecords(); !s.ok()) return s;
    if (ops_.empty()) return LineError(source_, 1, "no operator records; is this a G10 transformer graph?");
    if (absl::Status s = CreateTensors(); !s.ok()) return s;
    return ScheduleKernels();
  }

 private:
  void Tokenize(const std::string& text) {
    int line = 1;
    std::string current;
    for (char c : text) {
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (!current.empty()) tokens_.push_back({std::move(current), line});
        current.clear();
        if (c == '\n') ++line;
      } else {
        current.push_back(c);
      }
    }
    if (!current.empty()) tokens_.push_back({std::move(current), line});
    end_line_ = line;
  }

  absl::Status NextInt(int64_t& value, const char* what) {
    if (pos_ >= tokens_.size()) {
      return LineError(source_, end_line_,
                       absl::StrCat("file ends where ", what,
                                    " was expected; the last record is cut short"));
    }
    const Token& token = tokens_[pos_++];
    if (!absl::SimpleAtoi(token.text, &value)) {
      return LineError(source_, token.line,
                       absl::StrFormat("expected %s (an integer), found '%s'; fix or "
                                       "re-copy the file from G10's artifact",
                                       what, token.text));
    }
    return absl::OkStatus();
  }

  // Reads every `<id> <type> <n> <ids...> <shapes...> ----` record.
  absl::Status ReadRecords() {
    std::vector<Op> records;
    while (pos_ < tokens_.size()) {
      Op op;
      op.line = tokens_[pos_].line;
      int64_t value = 0;
      if (absl::Status s = NextInt(value, "an op id"); !s.ok()) return s;
      op.id = static_cast<int>(value);
      if (pos_ >= tokens_.size()) return LineError(source_, end_line_, "file ends after an op id");
      op.type = tokens_[pos_++].text;
      int64_t n = 0;
      if (absl::Status s = NextInt(n, "the input count"); !s.ok()) return s;
      if (n < 1 || n > 16) {
        return LineError(source_, tokens_[pos_ - 1].line,
                         absl::StrFormat("input count %d is out of range 1..16", n));
      }
      for (int64_t i = 0; i < n; ++i) {
        if (absl::Status s = NextInt(value, "an input id"); !s.ok()) return s;
        op.inputs.push_back(static_cast<int>(value));
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t rank = 0;
        if (absl::Status s = NextInt(rank, "a shape rank"); !s.ok()) return s;
        if (rank < 0 || rank > 8) {
          return LineError(source_, tokens_[pos_ - 1].line,
                           absl::StrFormat("shape rank %d is out of range 0..8", rank));
        }
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d) {
          if (absl::Status s = NextInt(value, "a dimension"); !s.ok()) return s;
          if (value <= 0) {
            return LineError(source_, tokens_[pos_ - 1].line,
                             absl::StrFormat("dimension %d is not positive", value));
          }
          dims.push_back(value == kBatchDim ? batch_ : value);
        }
        // Bound the product so a corrupt dimension cannot overflow the sizes.
        if (ShapeBytes(dims) > kMaxTensorBytes) {
          return LineError(source_, tokens_[pos_ - 1].line,
                           "the shape's size exceeds 256 TiB; a dimension is corrupt");
        }
        // The first record that mentions an id fixes its shape.
        shapes_.try_emplace(op.inputs[i], dims);
        op.shapes.push_back(std::move(dims));
      }
      if (pos_ >= tokens_.size() || !absl::StartsWith(tokens_[pos_].text, "---")) {
        const int line = pos_ < tokens_.size() ? tokens_[pos_].line : end_line_;
        return LineError(source_, line,
                         "expected the '-------------------' record separator; the "
                         "record's input count and shapes disagree");
      }
      ++pos_;
      records.push_back(std::move(op));
    }
    // A softmax is four SoftmaxBasic records: the first carries the inputs,
    // the op's output id is the last one's.
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].type != "SoftmaxBasic") {
        ops_.push_back(std::move(records[i]));
        continue;
      }
      if (i + 3 >= records.size() || records[i + 1].type != "SoftmaxBasic" ||
          records[i + 2].type != "SoftmaxBasic" || records[i + 3].type != "SoftmaxBasic") {
        return LineError(source_, records[i].line,
                         "a SoftmaxBasic record must be followed by three more "
                         "(G10 writes a softmax as four)");
      }
      Op op = std::move(records[i]);
      op.id = records[i + 3].id;
      ops_.push_back(std::move(op));
      i += 3;
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!op_index_.try_emplace(ops_[i].id, static_cast<int>(i)).second) {
        return LineError(source_, ops_[i].line,
                         absl::StrFormat("op id %d is produced twice", ops_[i].id));
      }
    }
    return absl::OkStatus();
  }

  int NewTensor(uint64_t raw_bytes, bool global, std::string what) {
    G10Tensor tensor;
    tensor.raw_bytes = raw_bytes;
    tensor.bytes = RoundToPage(raw_bytes);
    tensor.global = global;
    tensor.what = std::move(what);
    model_.tensors.push_back(std::move(tensor));
    return static_cast<int>(model_.tensors.size()) - 1;
  }

  // Saturates above kMaxTensorBytes, so callers can reject it without overflow.
  static uint64_t ShapeBytes(const std::vector<int64_t>& dims) {
    uint64_t bytes = 4;  // G10 counts every element as fp32
    for (int64_t d : dims) {
      if (static_cast<uint64_t>(d) > kMaxTensorBytes / bytes) return kMaxTensorBytes + 1;
      bytes *= static_cast<uint64_t>(d);
    }
    return bytes;
  }

  // G10's transformer_op_datalow_pass: output, new inputs, then gradients.
  absl::Status CreateTensors() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      Op& op = ops_[i];
      if (auto it = tensor_of_id_.find(op.id); it != tensor_of_id_.end()) {
        op.output = it->second;
      } else if (auto shape = shapes_.find(op.id); shape != shapes_.end()) {
        op.output = NewTensor(ShapeBytes(shape->second), op.id < border_,
                              absl::StrCat("op ", op.id, " output"));
        tensor_of_id_[op.id] = op.output;
      } else {
        // No consumer recorded a shape (the last op): G10 uses input 0's.
        op.output = NewTensor(ShapeBytes(op.shapes[0]), false,
                              absl::StrCat("op ", op.id, " output"));
      }
      for (int id : op.inputs) {
        auto it = tensor_of_id_.find(id);
        if (it == tensor_of_id_.end()) {
          const int index = NewTensor(ShapeBytes(shapes_.at(id)), id < border_,
                                      absl::StrCat(op_index_.contains(id) ? "op " : "leaf ", id,
                                                   id < border_ ? " (global)" : ""));
          it = tensor_of_id_.emplace(id, index).first;
        }
        op.input_tensor.push_back(it->second);
      }
      for (size_t j = 0; j < op.inputs.size(); ++j) {
        const int tensor = op.input_tensor[j];
        const bool global = model_.tensors[tensor].global;
        auto producer = op_index_.find(op.inputs[j]);
        const bool produced = producer != op_index_.end();
        // Power's exponent and constant leaves get no gradient; a global
        // input always gets one (it is a parameter).
        const bool grad = op.type == "Power" ? (!global && produced) : (global || produced);
        int d = -1;
        if (grad) {
          d = NewTensor(model_.tensors[tensor].bytes, false,
                        absl::StrCat("gradient of ", op.inputs[j], " at op ", op.id));
          if (produced) ops_[producer->second].d_outputs.push_back(d);
        }
        op.input_grad.push_back(d);
      }
      if (i + 1 == ops_.size()) {
        op.d_outputs.push_back(NewTensor(model_.tensors[op.output].bytes, false, "loss gradient"));
      }
    }
    return absl::OkStatus();
  }

  G10Kernel& AddKernel(const std::string& name, const Op& op, std::vector<int> inputs,
                       std::vector<int> outputs) {
    G10Kernel kernel;
    kernel.name = name;
    kernel.op_id = op.id;
    // G10 keeps std::set<Tensor*>: a tensor appears once per list.
    for (int t : inputs) {
      if (t >= 0 && std::find(kernel.inputs.begin(), kernel.inputs.end(), t) == kernel.inputs.end()) {
        kernel.inputs.push_back(t);
      }
    }
    for (int t : outputs) {
      if (t >= 0 &&
          std::find(kernel.outputs.begin(), kernel.outputs.end(), t) == kernel.outputs.end()) {
        kernel.outputs.push_back(t);
      }
    }
    model_.kernels.push_back(std::move(kernel));
    return model_.kernels.back();
  }

  // Index of the (last) global input, as G10's `global_id`; -1 if none.
  int GlobalInput(const Op& op) const {
    int global = -1;
    for (size_t j = 0; j < op.inputs.size(); ++j) {
      if (model_.tensors[op.input_tensor[j]].global) global = static_cast<int>(j);
    }
    return global;
  }

  void ApplyGradIfGlobal(const Op& op) {
    const int g = GlobalInput(op);
    if (g < 0) return;
    AddKernel("Apply_Grad", op, {op.input_tensor[g], op.input_grad[g]}, {op.input_tensor[g]});
  }

  // G10's transformer_scheduling_kernels.
  absl::Status ScheduleKernels() {
    static const std::map<std::string, std::string> kForward = {
        {"GatherV2", "GatherV2_Forward"}, {"Convolution", "Conv2d_Forward"},
        {"Dot", "Linear_Forward"},        {"Relu", "ReLU_Forward"},
        {"Add", "Add_Forward"},           {"BatchMatMul", "BatchMatMul_Forward"},
        {"Divide", "Divide_Forward"},     {"Multiply", "Multiply_Forward"},
        {"Power", "Power_Forward"},       {"SoftmaxBasic", "SoftmaxBasic_Forward"},
        {"Sqrt", "Sqrt_Forward"},         {"Subtract", "Subtract_Forward"},
        {"Sum", "Sum_Forward"},           {"Tanh", "Tanh_Forward"},
        {"Erf", "Erf_Forward"}};
    for (const Op& op : ops_) {
      auto it = kForward.find(op.type);
      if (it == kForward.end()) {
        return LineError(source_, op.line,
                         absl::StrFormat("operator type '%s' is not one G10 schedules", op.type));
      }
      AddKernel(it->second, op, op.input_tensor, {op.output});
    }
    model_.forward_kernels = static_cast<int>(model_.kernels.size());
    const Op& last = ops_.back();
    AddKernel("makeLoss", last, {last.output}, {last.d_outputs[0]});

    for (auto op_it = ops_.rbegin(); op_it != ops_.rend(); ++op_it) {
      const Op& op = *op_it;
      if (op.d_outputs.empty()) {
        return LineError(source_, op.line,
                         absl::StrFormat("op %d's output is never consumed, so G10 would "
                                         "have no gradient for it; the graph is incomplete",
                                         op.id));
      }
      const int dout = op.d_outputs[0];
      if (op.d_outputs.size() > 1) AddKernel("Add_MultiGredient", op, op.d_outputs, {dout});
      const std::string& type = op.type;
      if (type == "GatherV2" || type == "Dot" || type == "Convolution") {
        int input = -1, d_input = -1, weight = -1, d_weight = -1;
        for (size_t j = 0; j < op.inputs.size(); ++j) {
          if (model_.tensors[op.input_tensor[j]].global) {
            weight = op.input_tensor[j];
            d_weight = op.input_grad[j];
          } else {
            input = op.input_tensor[j];
            if (op.input_grad[j] >= 0) d_input = op.input_grad[j];
          }
        }
        if (weight < 0 || input < 0) {
          return LineError(source_, op.line,
                           absl::StrFormat("%s op %d needs one global (weight) input and one "
                                           "other; check the border id (now %d)",
                                           type, op.id, border_));
        }
        if (type == "GatherV2") {
          AddKernel("GatherV2_Backward", op, {dout, input}, {d_weight, d_input});
          AddKernel("Apply_Grad", op, {d_weight, weight}, {weight});
        } else if (type == "Dot") {
          AddKernel("Linear_Backward_Weight", op, {dout, input}, {d_weight});
          if (d_input >= 0) AddKernel("Linear_Backward_Input", op, {weight, dout}, {d_input});
          AddKernel("Linear_Apply_Grad_Weight", op, {d_weight, weight}, {weight});
        } else {
          AddKernel("Conv2d_Backward_Weight", op, {dout, input}, {d_weight});
          if (d_input >= 0) AddKernel("Conv2d_Backward_Input", op, {dout, weight}, {d_input});
          AddKernel("Apply_Grad", op, {d_weight, weight}, {weight});
        }
      } else if (type == "Relu" || type == "SoftmaxBasic") {
        AddKernel(type == "Relu" ? "ReLU_Backward" : "SoftmaxBasic_Backward", op,
                  {op.input_tensor[0], dout}, {op.input_grad[0]});
      } else if (type == "Add" || type == "Subtract") {
        AddKernel(type + "_Backward", op, {dout}, op.input_grad);
        ApplyGradIfGlobal(op);
      } else if (type == "BatchMatMul" || type == "Multiply" || type == "Divide") {
        if (op.inputs.size() != 2) {
          return LineError(source_, op.line,
                           absl::StrFormat("%s op %d must have two inputs", type, op.id));
        }
        if (type == "Divide") {
          if (op.input_grad[0] >= 0) {
            AddKernel("Divide_Backward_A", op, {op.input_tensor[1], dout}, {op.input_grad[0]});
          }
          if (op.input_grad[1] >= 0) {
            AddKernel("Divide_Backward_B", op, {op.input_tensor[1], op.output, dout},
                      {op.input_grad[1]});
          }
        } else {
          for (int j = 0; j < 2; ++j) {
            if (op.input_grad[j] < 0) continue;
            AddKernel(type + "_Backward", op, {dout, op.input_tensor[1 - j]}, {op.input_grad[j]});
          }
        }
        ApplyGradIfGlobal(op);
      } else if (type == "Power") {
        if (op.inputs.size() != 2) {
          return LineError(source_, op.line,
                           absl::StrFormat("Power op %d must have two inputs", op.id));
        }
        AddKernel("Power_Backward", op, {dout, op.input_tensor[0], op.input_tensor[1]},
                  {op.input_grad[0]});
      } else {  // Sqrt, Sum, Tanh, Erf
        AddKernel(type + "_Backward", op, {dout, op.input_tensor[0]}, {op.input_grad[0]});
      }
    }
    return absl::OkStatus();
  }

  const std::string& source_;
  const int batch_;
  const int border_;
  G10Model& model_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int end_line_ = 1;
  std::vector<Op> ops_;
  absl::flat_hash_map<int, int> op_index_;            // op id -> ops_ index
  absl::flat_hash_map<int, std::vector<int64_t>> shapes_;  // id -> dims
  absl::flat_hash_map<int, int> tensor_of_id_;        // id -> tensor index
};

// Reads one `cudnn<B>*.txt` file: line i is `<i> <value> <unit>`.
absl::StatusOr<std::vector<double>> ReadPerKernelFile(const std::string& path,
                                                      const std::string& unit,
                                                      const std::string& fix) {
  absl::StatusOr<std::string> text = ReadFile(path, fix);
  if (!text.ok()) return text.status();
  std::vector<double> values;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t index = -1;
    double value = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &index) ||
        !absl::SimpleAtod(fields[1], &value) || fields[2] != unit || !std::isfinite(value) ||
        value < 0 || value > kMaxFileValue) {
      return LineError(path, line_number,
                       absl::StrFormat("expected '<kernel> <value> %s', found '%s'; re-copy "
                                       "the file from G10's artifact",
                                       unit, line));
    }
    if (index != static_cast<int64_t>(values.size())) {
      return LineError(path, line_number,
                       absl::StrFormat("kernel %d where %d was expected: every kernel needs "
                                       "exactly one line, in order",
                                       index, values.size()));
    }
    values.push_back(value);
  }
  return values;
}

Nanos MsToNanos(double ms) { return static_cast<Nanos>(std::llround(ms * 1e6)); }

}  // namespace

int G10DefaultBorder(const std::string& model) {
  if (absl::StartsWithIgnoreCase(model, "BERT")) return 210;
  if (absl::StartsWithIgnoreCase(model, "ViT")) return 184;
  return 0;
}

absl::StatusOr<G10Model> ParseG10TransformerGraph(const std::string& text,
                                                  const std::string& source, int batch,
                                                  int border) {
  if (batch <= 0) return absl::InvalidArgumentError("the batch size must be positive");
  if (border <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: no border id (ids below it are global); G10 uses 210 for BERT and 184 for "
        "ViT: pass border=N",
        source));
  }
  G10Model model;
  model.batch = batch;
  model.border = border;
  TransformerBuilder builder(source, batch, border, model);
  if (absl::Status s = builder.Build(text); !s.ok()) return s;
  return model;
}

absl::StatusOr<G10Model> LoadG10Model(const std::string& dir, const std::string& model_name,
                                      int batch, int border) {
  const std::string fix_dir =
      "pass the G10 data directory (the one holding frontend/Nets and results/) with --dir "
      "or dir=";
  if (model_name.empty() || model_name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model '%s' is not a G10 model name such as BERT_Base", model_name));
  }
  const std::string graph_path = absl::StrCat(dir, "/frontend/Nets/", model_name, ".txt");
  absl::StatusOr<std::string> graph = ReadFile(graph_path, fix_dir);
  if (!graph.ok()) return graph.status();
  // A transformer graph starts with an op id; a CNN graph is PyTorch's
  // print(model) text, which starts with the model's class name.
  absl::string_view head = absl::StripLeadingAsciiWhitespace(*graph);
  if (head.empty() || !absl::ascii_isdigit(static_cast<unsigned char>(head[0]))) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s:1: a CNN graph (PyTorch print text); only G10's transformer graphs (e.g. "
        "BERT_Base) are supported so far, because CNN residual structure is hard-coded "
        "in G10 by block name",
        graph_path));
  }
  if (border <= 0) border = G10DefaultBorder(model_name);
  absl::StatusOr<G10Model> model = ParseG10TransformerGraph(*graph, graph_path, batch, border);
  if (!model.ok()) return model.status();
  model->model = model_name;

  const std::string prefix =
      absl::StrCat(dir, "/results/", model_name, "/cudnn", batch);
  std::vector<std::string> shipped;
  std::error_code ec;
  for (const auto& entry :
       std::filesystem::directory_iterator(absl::StrCat(dir, "/results/", model_name), ec)) {
    const std::string name = entry.path().filename().string();
    int b = 0;
    if (absl::StartsWith(name, "cudnn") && absl::EndsWith(name, ".txt") &&
        absl::SimpleAtoi(name.substr(5, name.size() - 9), &b)) {
      shipped.push_back(absl::StrCat(b));
    }
  }
  std::sort(shipped.begin(), shipped.end());
  const std::string fix_batch = absl::StrFormat(
      "kernel times are measured, not scaled, so use a batch G10 shipped times for "
      "(found: %s)",
      shipped.empty() ? "none" : absl::StrJoin(shipped, ", "));
  absl::StatusOr<std::vector<double>> ideal = ReadPerKernelFile(prefix + ".txt", "ms", fix_batch);
  if (!ideal.ok()) return ideal.status();
  absl::StatusOr<std::vector<double>> input_pf =
      ReadPerKernelFile(prefix + "InputPF.txt", "ms", fix_batch);
  if (!input_pf.ok()) return input_pf.status();
  absl::StatusOr<std::vector<double>> pf = ReadPerKernelFile(prefix + "PF.txt", "ms", fix_batch);
  if (!pf.ok()) return pf.status();
  absl::StatusOr<std::vector<double>> workspace =
      ReadPerKernelFile(prefix + "Workspace.txt", "B", fix_batch);
  if (!workspace.ok()) return workspace.status();

  const size_t kernels = model->kernels.size();
  const std::pair<const char*, const std::vector<double>*> files[] = {
      {".txt", &*ideal}, {"InputPF.txt", &*input_pf}, {"PF.txt", &*pf},
      {"Workspace.txt", &*workspace}};
  for (const auto& [suffix, values] : files) {
    if (values->size() != kernels) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s%s:%d: has %d kernel lines but the graph %s schedules %d; the files must come "
          "from the same model and batch",
          prefix, suffix, values->size() + 1, values->size(), graph_path, kernels));
    }
  }
  for (size_t k = 0; k < kernels; ++k) {
    G10Kernel& kernel = model->kernels[k];
    // G10 clamps PF >= InputPF >= ideal.
    kernel.ideal_ns = MsToNanos((*ideal)[k]);
    kernel.input_pf_ns = std::max(kernel.ideal_ns, MsToNanos((*input_pf)[k]));
    kernel.pf_ns = std::max(kernel.input_pf_ns, MsToNanos((*pf)[k]));
    kernel.workspace_raw_bytes = static_cast<uint64_t>((*workspace)[k]);
    if (kernel.workspace_raw_bytes > 0) {
      G10Tensor tensor;
      tensor.raw_bytes = kernel.workspace_raw_bytes;
      tensor.bytes = RoundToPage(tensor.raw_bytes);
      tensor.what = absl::StrCat("workspace of kernel ", k);
      model->tensors.push_back(std::move(tensor));
      kernel.outputs.push_back(static_cast<int>(model->tensors.size()) - 1);
      ++model->workspace_tensors;
    }
  }
  // Static layout: globals packed in creation order, intermediates after them.
  for (G10Tensor& tensor : model->tensors) {
    if (tensor.global) {
      tensor.offset = model->global_bytes;
      model->global_bytes += tensor.bytes;
    }
  }
  for (G10Tensor& tensor : model->tensors) {
    if (!tensor.global) {
      tensor.offset = model->global_bytes + model->intermediate_bytes;
      model->intermediate_bytes += tensor.bytes;
    }
  }
  return model;
}

}  // namespace umlab
