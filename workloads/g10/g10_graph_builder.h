// What G10's two graph front ends (transformer token streams and CNN print
// text) share when they turn a graph into a G10Model: G10's tensor size rule
// (4 bytes per element, rounded up to whole 4 KB pages), tensor creation in
// G10's id order, kernel lists kept as sets, and the `file:line: ...` error
// format. Internal to workloads/g10_*.cc.
#ifndef UMLAB_WORKLOADS_G10_G10_GRAPH_BUILDER_H_
#define UMLAB_WORKLOADS_G10_G10_GRAPH_BUILDER_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "workloads/g10/g10_graph.h"

namespace umlab {

// Far above any real model; sizes are checked against it so that a corrupt
// dimension cannot overflow the byte counts.
inline constexpr uint64_t kG10MaxTensorBytes = uint64_t{1} << 48;

// G10 allocates every tensor in whole 4 KB pages.
uint64_t G10RoundToPage(uint64_t bytes);

// 4 x product(dims): G10 counts every element as fp32. Saturates at
// kG10MaxTensorBytes + 1, so callers can reject it without overflow; a
// non-positive dimension gives 0.
uint64_t G10ElementBytes(std::initializer_list<int64_t> dims);
uint64_t G10ElementBytes(const std::vector<int64_t>& dims);

// InvalidArgument "<source>:<line>: <what>", the one-line form every G10
// input error takes.
absl::Status G10LineError(const std::string& source, int line, const std::string& what);

// The tail both front ends' Parse functions share: a G10Model of `kind` and
// `batch` that `build` fills (it sets the graph's own setting, the CNN input
// size or the transformer border, then parses the graph into it). Returns
// the model, or the error `build` returned.
absl::StatusOr<G10Model> BuildG10Model(G10GraphKind kind, int batch,
                                       const std::function<absl::Status(G10Model&)>& build);

// Appends tensors and kernels to a G10Model in G10's creation and
// scheduling order.
class G10ModelBuilder {
 public:
  explicit G10ModelBuilder(G10Model& model) : model_(model) {}

  // A new tensor of `raw_bytes` (page-rounded in `bytes`); returns its index,
  // which is its G10 tensor id.
  int NewTensor(uint64_t raw_bytes, bool global, std::string what);

  // A new kernel; returns its index. G10 keeps kernel inputs and outputs as
  // std::set<Tensor*>, so a tensor appears once per list; negative indices
  // (absent tensors) are skipped.
  int AddKernel(std::string name, int op_id, const std::vector<int>& inputs,
                const std::vector<int>& outputs);

  const G10Tensor& tensor(int index) const { return model_.tensors[index]; }
  G10Model& model() { return model_; }

 private:
  G10Model& model_;
};

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_GRAPH_BUILDER_H_
