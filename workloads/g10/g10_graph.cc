#include "workloads/g10/g10_graph.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "workloads/g10/g10_cnn_graph.h"
#include "workloads/g10/g10_graph_builder.h"
#include "workloads/g10/g10_transformer_graph.h"

namespace umlab {

namespace {

// Largest value a cudnn file may hold (ms or bytes): keeps ns and byte counts in range.
constexpr double kMaxFileValue = 1e12;

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& fix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("%s: cannot open; %s", path, fix));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Reads one `cudnn<B>*.txt` file (see ParseG10PerKernelFile).
absl::StatusOr<std::vector<double>> ReadPerKernelFile(const std::string& path,
                                                      const std::string& unit,
                                                      const std::string& fix) {
  absl::StatusOr<std::string> text = ReadFile(path, fix);
  if (!text.ok()) return text.status();
  return ParseG10PerKernelFile(*text, path, unit);
}

Nanos MsToNanos(double ms) { return static_cast<Nanos>(std::llround(ms * 1e6)); }

}  // namespace

int G10DefaultBorder(const std::string& model) {
  if (absl::StartsWithIgnoreCase(model, "BERT")) return 210;
  if (absl::StartsWithIgnoreCase(model, "ViT")) return 184;
  return 0;
}

int G10DefaultInputSize(const std::string& model) {
  return absl::StartsWithIgnoreCase(model, "Inception") ? 299 : 224;
}

absl::StatusOr<std::vector<double>> ParseG10PerKernelFile(const std::string& text,
                                                          const std::string& source,
                                                          const std::string& unit) {
  std::vector<double> values;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t index = -1;
    double value = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &index) ||
        !absl::SimpleAtod(fields[1], &value) || fields[2] != unit || !std::isfinite(value) ||
        value < 0 || value > kMaxFileValue) {
      return G10LineError(source, line_number,
                       absl::StrFormat("expected '<kernel> <value> %s', found '%s'; re-copy "
                                       "the file from G10's artifact",
                                       unit, line));
    }
    if (index != static_cast<int64_t>(values.size())) {
      return G10LineError(source, line_number,
                       absl::StrFormat("kernel %d where %d was expected: every kernel needs "
                                       "exactly one line, in order",
                                       index, values.size()));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<G10Model> LoadG10Model(const std::string& dir, const std::string& model_name,
                                      int batch, int border) {
  const std::string fix_dir =
      "pass the G10 data directory (the one holding frontend/Nets and results/) with --dir "
      "or dir=";
  if (model_name.empty() || model_name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model '%s' is not a G10 model name such as BERT_Base or ResNet152", model_name));
  }
  const std::string graph_path = absl::StrCat(dir, "/frontend/Nets/", model_name, ".txt");
  absl::StatusOr<std::string> graph = ReadFile(graph_path, fix_dir);
  if (!graph.ok()) return graph.status();
  // A transformer graph starts with an op id; a CNN graph is PyTorch's
  // print(model) text, which starts with the model's class name.
  absl::string_view head = absl::StripLeadingAsciiWhitespace(*graph);
  absl::StatusOr<G10Model> model;
  if (!head.empty() && absl::ascii_isdigit(static_cast<unsigned char>(head[0]))) {
    if (border <= 0) border = G10DefaultBorder(model_name);
    model = ParseG10TransformerGraph(*graph, graph_path, batch, border);
  } else {
    if (border > 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s:1: border=%d applies to transformer graphs only; a CNN graph's globals are its "
          "weights (G10 marks them by layer type): leave border at 0",
          graph_path, border));
    }
    model = ParseG10CnnGraph(*graph, graph_path, batch, G10DefaultInputSize(model_name));
  }
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
  G10ModelBuilder builder(*model);
  for (size_t k = 0; k < kernels; ++k) {
    // G10 clamps PF >= InputPF >= ideal.
    const Nanos ideal_ns = MsToNanos((*ideal)[k]);
    const Nanos input_pf_ns = std::max(ideal_ns, MsToNanos((*input_pf)[k]));
    const Nanos pf_ns = std::max(input_pf_ns, MsToNanos((*pf)[k]));
    const uint64_t workspace_bytes = static_cast<uint64_t>((*workspace)[k]);
    // G10's loadWorkspaceSizes: a new intermediate after all graph tensors.
    const int tensor = workspace_bytes == 0
                           ? -1
                           : builder.NewTensor(workspace_bytes, false,
                                               absl::StrCat("workspace of kernel ", k));
    G10Kernel& kernel = model->kernels[k];
    kernel.ideal_ns = ideal_ns;
    kernel.input_pf_ns = input_pf_ns;
    kernel.pf_ns = pf_ns;
    kernel.workspace_raw_bytes = workspace_bytes;
    if (tensor >= 0) {
      kernel.outputs.push_back(tensor);
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
