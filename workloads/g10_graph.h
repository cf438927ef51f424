// A training iteration as G10 (MICRO'23, platformxlab/G10) builds it from its
// published inputs: a model graph `frontend/Nets/<Model>.txt` and per-kernel
// files `results/<Model>/cudnn<B>{,InputPF,PF,Workspace}.txt` measured on an
// A100 40 GB. Tensor sizes, creation order and kernel order follow G10's
// src/analysis.cc, so tensor and kernel ids line up with G10's own logs and
// with line i of each cudnn file. The format is described in
// ../shared/data/g10/FORMAT.md (and in docs/workloads.md).
//
// Only transformer graphs (G10's `is_transformer` token stream, e.g.
// BERT_Base) are supported. CNN graphs (PyTorch print text, e.g. ResNet152)
// need G10's hard-coded residual/branch structure and are rejected with a
// clear error.
#ifndef UMLAB_WORKLOADS_G10_GRAPH_H_
#define UMLAB_WORKLOADS_G10_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/memory_units.h"

namespace umlab {

struct G10Tensor {
  uint64_t raw_bytes = 0;  // 4 x product(dims), as G10 counts every element
  uint64_t bytes = 0;      // raw_bytes rounded up to 4096, G10's page alignment
  bool global = false;     // a weight: persistent, never freed
  uint64_t offset = 0;     // from the layout's start (set by LoadG10Model): globals first
  std::string what;        // e.g. "op 215 output", for messages and tests
};

struct G10Kernel {
  std::string name;           // G10's CUDAKernelType name, e.g. Linear_Forward
  int op_id = -1;             // the graph op it belongs to (-1: none)
  std::vector<int> inputs;    // tensor indices, de-duplicated (G10 keeps sets)
  std::vector<int> outputs;   // tensor indices, de-duplicated
  Nanos ideal_ns = 0;         // cudnn<B>.txt: time with every tensor resident
  Nanos input_pf_ns = 0;      // cudnn<B>InputPF.txt, clamped >= ideal
  Nanos pf_ns = 0;            // cudnn<B>PF.txt, clamped >= InputPF
  uint64_t workspace_raw_bytes = 0;  // cudnn<B>Workspace.txt
};

struct G10Model {
  std::string model;
  int batch = 0;
  int border = 0;                 // ids below it are global
  std::vector<G10Tensor> tensors;  // in G10's creation order (its tensor ids)
  std::vector<G10Kernel> kernels;  // in G10's scheduling order (its kernel ids)
  int forward_kernels = 0;         // before makeLoss
  int workspace_tensors = 0;       // appended after the graph's tensors
  uint64_t global_bytes = 0;       // sum of global tensors' page-rounded sizes
  uint64_t intermediate_bytes = 0; // sum of the others'
};

// G10's `borden` for a model it ships: 210 for BERT models, 184 for ViT; 0
// when unknown (the caller must then pass one).
int G10DefaultBorder(const std::string& model);

// Reads `<dir>/frontend/Nets/<model>.txt` and the four
// `<dir>/results/<model>/cudnn<batch>*.txt` files. `border` <= 0 means
// G10DefaultBorder(model). Errors name file:line and what to do.
absl::StatusOr<G10Model> LoadG10Model(const std::string& dir, const std::string& model,
                                      int batch, int border = 0);

// Parses a transformer graph already in memory; `source` names it in errors.
// Kernel times are left zero and no workspace tensors are added.
absl::StatusOr<G10Model> ParseG10TransformerGraph(const std::string& text,
                                                  const std::string& source, int batch,
                                                  int border);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_GRAPH_H_
