// G10's transformer front end: the `is_transformer` token stream of
// frontend/Nets/BERT_Base.txt (and ViT), turned into tensors and kernels
// exactly as G10's src/ast.cc (transformer_parse) and src/analysis.cc
// (transformer_op_datalow_pass, transformer_scheduling_kernels) do. The file
// format is in data/g10/FORMAT.md; the loader is g10_graph.h.
#ifndef UMLAB_WORKLOADS_G10_G10_TRANSFORMER_GRAPH_H_
#define UMLAB_WORKLOADS_G10_G10_TRANSFORMER_GRAPH_H_

#include <string>

#include "absl/status/statusor.h"
#include "workloads/g10/g10_graph.h"

namespace umlab {

// Parses a transformer graph already in memory; `source` names it in errors.
// Ids below `border` are global. Kernel times are left zero and no workspace
// tensors are added (LoadG10Model does both).
absl::StatusOr<G10Model> ParseG10TransformerGraph(const std::string& text,
                                                  const std::string& source, int batch,
                                                  int border);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_TRANSFORMER_GRAPH_H_
