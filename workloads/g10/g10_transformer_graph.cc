#include "workloads/g10/g10_transformer_graph.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workloads/g10/g10_graph_builder.h"

namespace umlab {

namespace {

constexpr int64_t kBatchDim = 99;  // G10's placeholder for the batch dimension

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

class TransformerBuilder {
 public:
  TransformerBuilder(const std::string& source, int batch, int border, G10Model& model)
      : source_(source), batch_(batch), border_(border), model_(model), builder_(model) {}

  absl::Status Build(const std::string& text) {
    Tokenize(text);
    if (absl::Status s = ReadRecords(); !s.ok()) return s;
    if (ops_.empty()) {
      return G10LineError(source_, 1, "no operator records; is this a G10 transformer graph?");
    }
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
      return G10LineError(source_, end_line_,
                       absl::StrCat("file ends where ", what,
                                    " was expected; the last record is cut short"));
    }
    const Token& token = tokens_[pos_++];
    if (!absl::SimpleAtoi(token.text, &value)) {
      return G10LineError(source_, token.line,
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
      if (pos_ >= tokens_.size()) {
        return G10LineError(source_, end_line_, "file ends after an op id");
      }
      op.type = tokens_[pos_++].text;
      int64_t n = 0;
      if (absl::Status s = NextInt(n, "the input count"); !s.ok()) return s;
      if (n < 1 || n > 16) {
        return G10LineError(source_, tokens_[pos_ - 1].line,
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
          return G10LineError(source_, tokens_[pos_ - 1].line,
                           absl::StrFormat("shape rank %d is out of range 0..8", rank));
        }
        std::vector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d) {
          if (absl::Status s = NextInt(value, "a dimension"); !s.ok()) return s;
          if (value <= 0) {
            return G10LineError(source_, tokens_[pos_ - 1].line,
                             absl::StrFormat("dimension %d is not positive", value));
          }
          dims.push_back(value == kBatchDim ? batch_ : value);
        }
        // Bound the product so a corrupt dimension cannot overflow the sizes.
        if (G10ElementBytes(dims) > kG10MaxTensorBytes) {
          return G10LineError(source_, tokens_[pos_ - 1].line,
                           "the shape's size exceeds 256 TiB; a dimension is corrupt");
        }
        // The first record that mentions an id fixes its shape.
        shapes_.try_emplace(op.inputs[i], dims);
        op.shapes.push_back(std::move(dims));
      }
      if (pos_ >= tokens_.size() || !absl::StartsWith(tokens_[pos_].text, "---")) {
        const int line = pos_ < tokens_.size() ? tokens_[pos_].line : end_line_;
        return G10LineError(source_, line,
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
        return G10LineError(source_, records[i].line,
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
        return G10LineError(source_, ops_[i].line,
                         absl::StrFormat("op id %d is produced twice", ops_[i].id));
      }
    }
    return absl::OkStatus();
  }

  // G10's transformer_op_datalow_pass: output, new inputs, then gradients.
  absl::Status CreateTensors() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      Op& op = ops_[i];
      if (auto it = tensor_of_id_.find(op.id); it != tensor_of_id_.end()) {
        op.output = it->second;
      } else if (auto shape = shapes_.find(op.id); shape != shapes_.end()) {
        op.output = builder_.NewTensor(G10ElementBytes(shape->second), op.id < border_,
                              absl::StrCat("op ", op.id, " output"));
        tensor_of_id_[op.id] = op.output;
      } else {
        // No consumer recorded a shape (the last op): G10 uses input 0's.
        op.output = builder_.NewTensor(G10ElementBytes(op.shapes[0]), false,
                              absl::StrCat("op ", op.id, " output"));
      }
      for (int id : op.inputs) {
        auto it = tensor_of_id_.find(id);
        if (it == tensor_of_id_.end()) {
          const int index = builder_.NewTensor(G10ElementBytes(shapes_.at(id)), id < border_,
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
          d = builder_.NewTensor(model_.tensors[tensor].bytes, false,
                        absl::StrCat("gradient of ", op.inputs[j], " at op ", op.id));
          if (produced) ops_[producer->second].d_outputs.push_back(d);
        }
        op.input_grad.push_back(d);
      }
      if (i + 1 == ops_.size()) {
        op.d_outputs.push_back(
            builder_.NewTensor(model_.tensors[op.output].bytes, false, "loss gradient"));
      }
    }
    return absl::OkStatus();
  }

  void AddKernel(const std::string& name, const Op& op, const std::vector<int>& inputs,
                 const std::vector<int>& outputs) {
    builder_.AddKernel(name, op.id, inputs, outputs);
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
        return G10LineError(source_, op.line,
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
        return G10LineError(source_, op.line,
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
          return G10LineError(source_, op.line,
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
          return G10LineError(source_, op.line,
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
          return G10LineError(source_, op.line,
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
  G10ModelBuilder builder_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int end_line_ = 1;
  std::vector<Op> ops_;
  absl::flat_hash_map<int, int> op_index_;            // op id -> ops_ index
  absl::flat_hash_map<int, std::vector<int64_t>> shapes_;  // id -> dims
  absl::flat_hash_map<int, int> tensor_of_id_;        // id -> tensor index
};

}  // namespace

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
  return BuildG10Model(G10GraphKind::kTransformer, batch, [&](G10Model& model) {
    model.border = border;
    return TransformerBuilder(source, batch, border, model).Build(text);
  });
}

}  // namespace umlab
