#include "workloads/g10/g10_graph_builder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/memory_units.h"

namespace umlab {

namespace {

template <typename Dims>
uint64_t ElementBytes(const Dims& dims) {
  uint64_t bytes = 4;
  for (int64_t d : dims) {
    if (d <= 0) return 0;
    if (static_cast<uint64_t>(d) > kG10MaxTensorBytes / bytes) return kG10MaxTensorBytes + 1;
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

void AppendUnique(const std::vector<int>& from, std::vector<int>& to) {
  for (int t : from) {
    if (t >= 0 && std::find(to.begin(), to.end(), t) == to.end()) to.push_back(t);
  }
}

}  // namespace

uint64_t G10RoundToPage(uint64_t bytes) { return (bytes + kPageSize - 1) / kPageSize * kPageSize; }

uint64_t G10ElementBytes(std::initializer_list<int64_t> dims) { return ElementBytes(dims); }

uint64_t G10ElementBytes(const std::vector<int64_t>& dims) { return ElementBytes(dims); }

absl::Status G10LineError(const std::string& source, int line, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s:%d: %s", source, line, what));
}

int G10ModelBuilder::NewTensor(uint64_t raw_bytes, bool global, std::string what) {
  G10Tensor tensor;
  tensor.raw_bytes = raw_bytes;
  tensor.bytes = G10RoundToPage(raw_bytes);
  tensor.global = global;
  tensor.what = std::move(what);
  model_.tensors.push_back(std::move(tensor));
  return static_cast<int>(model_.tensors.size()) - 1;
}

int G10ModelBuilder::AddKernel(std::string name, int op_id, const std::vector<int>& inputs,
                               const std::vector<int>& outputs) {
  G10Kernel kernel;
  kernel.name = std::move(name);
  kernel.op_id = op_id;
  AppendUnique(inputs, kernel.inputs);
  AppendUnique(outputs, kernel.outputs);
  model_.kernels.push_back(std::move(kernel));
  return static_cast<int>(model_.kernels.size()) - 1;
}

absl::StatusOr<G10Model> BuildG10Model(G10GraphKind kind, int batch,
                                       const std::function<absl::Status(G10Model&)>& build) {
  G10Model model;
  model.kind = kind;
  model.batch = batch;
  if (absl::Status s = build(model); !s.ok()) return s;
  return model;
}

}  // namespace umlab
