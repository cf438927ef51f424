#include "cli/import_g10.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/exit_codes.h"
#include "core/trace_writer.h"
#include "workloads/g10/g10_graph.h"
#include "workloads/g10/g10_workload.h"

namespace umlab::cli {

namespace {

ImportG10Failure UsageError(std::string message) {
  return ImportG10Failure{kExitUsage, std::move(message)};
}

ImportG10Failure InputError(const absl::Status& status) {
  return ImportG10Failure{kExitFailure, std::string(status.message())};
}

// Parses a positive integer option; `fallback` when absent.
std::optional<ImportG10Failure> PositiveInt(const Arguments& args, const std::string& name,
                                            int fallback, int& value) {
  const std::optional<std::string> text = args.Get(name);
  if (!text.has_value()) {
    value = fallback;
    return std::nullopt;
  }
  if (!absl::SimpleAtoi(*text, &value) || value <= 0) {
    return UsageError(absl::StrFormat("--%s=%s is not a positive integer", name, *text));
  }
  return std::nullopt;
}

// `--list`: every model of DIR/frontend/Nets with the batch sizes whose
// four cudnn files DIR/results/NAME holds.
std::optional<ImportG10Failure> ListG10Models(const std::string& dir, std::ostream& out) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path nets = fs::path(dir) / "frontend" / "Nets";
  if (!fs::is_directory(nets, error)) {
    return ImportG10Failure{1, absl::StrCat("no G10 data in ", dir, ": ", nets.string(),
                                            " is not a directory (--dir=DIR names one)")};
  }
  std::vector<std::string> models;
  for (const fs::directory_entry& entry : fs::directory_iterator(nets, error)) {
    if (entry.path().extension() == ".txt") models.push_back(entry.path().stem().string());
  }
  std::sort(models.begin(), models.end());
  for (const std::string& model : models) {
    std::vector<int> batches;
    const fs::path results = fs::path(dir) / "results" / model;
    for (const fs::directory_entry& entry : fs::directory_iterator(results, error)) {
      const std::string name = entry.path().filename().string();
      int batch = 0;
      if (!absl::StartsWith(name, "cudnn") || !absl::EndsWith(name, ".txt") ||
          !absl::SimpleAtoi(name.substr(5, name.size() - 9), &batch) || batch <= 0) {
        continue;  // the time file alone names a batch; the others are checked below
      }
      const std::string stem = absl::StrCat("cudnn", batch);
      bool complete = true;
      for (const char* suffix : {"InputPF", "PF", "Workspace"}) {
        complete = complete && fs::exists(results / absl::StrCat(stem, suffix, ".txt"), error);
      }
      if (complete) batches.push_back(batch);
    }
    std::sort(batches.begin(), batches.end());
    out << model << ": "
        << (batches.empty() ? std::string("no complete batch")
                            : absl::StrCat("batch ", absl::StrJoin(batches, ", ")))
        << "\n";
  }
  if (models.empty()) out << "no models in " << nets.string() << "\n";
  return std::nullopt;
}

}  // namespace

std::vector<OptionSpec> ImportG10Options() {
  return {{"list", "", "list the models and batch sizes DIR holds, and import nothing"},
          {"model", "NAME", "G10 model: frontend/Nets/NAME.txt (e.g. BERT_Base, ResNet152)"},
          {"batch", "B", "batch size; results/NAME/cudnnB*.txt must exist"},
          {"dir", "DIR", "G10 data directory holding frontend/ and results/", kDefaultG10Dir},
          {"output", "FILE", "the trace to write (written to FILE.tmp, then renamed)"},
          {"iterations", "N", "training iterations to write", "2"},
          {"border", "ID",
           "transformer graphs: ids below it are global (0: BERT 210, ViT 184); CNN graphs take "
           "none (their weights are global)",
           "0"}};
}

std::optional<ImportG10Failure> ImportG10(const Arguments& args, std::ostream& out) {
  if (!args.positional().empty()) {
    return UsageError(absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  if (args.Has("list")) return ListG10Models(args.GetOr("dir", kDefaultG10Dir), out);
  const std::optional<std::string> model_name = args.Get("model");
  const std::optional<std::string> output = args.Get("output");
  if (!model_name.has_value() || !args.Has("batch") || !output.has_value()) {
    return UsageError("needs --model=NAME --batch=B --output=FILE.umt (see --help)");
  }
  int batch = 0, iterations = 0, border = 0;
  if (auto f = PositiveInt(args, "batch", 0, batch)) return f;
  if (auto f = PositiveInt(args, "iterations", 2, iterations)) return f;
  if (args.Has("border") && args.Get("border") != "0") {
    if (auto f = PositiveInt(args, "border", 0, border)) return f;
  }
  const std::string dir = args.GetOr("dir", kDefaultG10Dir);

  absl::StatusOr<G10Model> model = LoadG10Model(dir, *model_name, batch, border);
  if (!model.ok()) return InputError(model.status());
  const uint64_t tensors = model->tensors.size();
  const uint64_t kernels = model->kernels.size();
  const uint64_t footprint = model->global_bytes + model->intermediate_bytes;
  auto shared = std::make_shared<const G10Model>(*std::move(model));

  absl::StatusOr<std::unique_ptr<TraceWriter>> writer = TraceWriter::Create(
      *output, {{"workload", "g10"},
                {"model", *model_name},
                {"batch", absl::StrCat(batch)},
                {"iterations", absl::StrCat(iterations)},
                {"footprint_bytes", absl::StrCat(footprint)},
                {"source", "G10 (MICRO'23) public artifact, Apache-2.0"}});
  if (!writer.ok()) return InputError(writer.status());
  std::unique_ptr<EventSource> source = OpenG10Program(shared, iterations);
  Event event;
  while (source->Next(event)) {
    if (absl::Status s = (*writer)->Append(event); !s.ok()) return InputError(s);
  }
  if (absl::Status s = source->status(); !s.ok()) return InputError(s);
  if (absl::Status s = (*writer)->Close(); !s.ok()) return InputError(s);
  out << absl::StrFormat("wrote %s: g10 %s batch %d, %d tensors, %d kernels x %d iterations, "
                         "%d events\n",
                         *output, *model_name, batch, tensors, kernels, iterations,
                         (*writer)->events_written());
  return std::nullopt;
}

}  // namespace umlab::cli
