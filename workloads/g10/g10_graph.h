// A training iteration as G10 (MICRO'23, platformxlab/G10) builds it from its
// published inputs: a model graph `frontend/Nets/<Model>.txt` and per-kernel
// files `results/<Model>/cudnn<B>{,InputPF,PF,Workspace}.txt` measured on an
// A100 40 GB. Tensor sizes, creation order and kernel order follow G10's own
// source (src/ast.cc, src/analysis.cc, src/main.cc), so tensor and kernel ids
// line up with G10's logs and with line i of each cudnn file. The formats are
// described in data/g10/FORMAT.md and docs/workloads.md.
//
// Both of G10's graph kinds load:
//   - transformer graphs (G10's `is_transformer` token stream: BERT_Base,
//     VIT), parsed by g10_transformer_graph.h; ids below the border are
//     global;
//   - CNN graphs (PyTorch print text: ResNet152 and the other ResNets,
//     Inceptionv3, SENet154, plain chains such as AlexNet), parsed by
//     g10_cnn_graph.h with G10's hard-coded residual, Inception and SE
//     wiring; weights are global.
// This file holds the model both produce and the loader, which adds what the
// two share: the cudnn files' times and workspaces, and the static layout.
#ifndef UMLAB_WORKLOADS_G10_G10_GRAPH_H_
#define UMLAB_WORKLOADS_G10_G10_GRAPH_H_

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
  std::string what;        // e.g. "op 215 output", "layer1.0.conv1 weight"
};

struct G10Kernel {
  std::string name;           // G10's CUDAKernelType name, e.g. Linear_Forward
  int op_id = -1;             // transformer: its op's id; CNN: its layer's index in
                              // G10's forward layer order
  std::vector<int> inputs;    // tensor indices, de-duplicated (G10 keeps sets)
  std::vector<int> outputs;   // tensor indices, de-duplicated
  Nanos ideal_ns = 0;         // cudnn<B>.txt: time with every tensor resident
  Nanos input_pf_ns = 0;      // cudnn<B>InputPF.txt, clamped >= ideal
  Nanos pf_ns = 0;            // cudnn<B>PF.txt, clamped >= InputPF
  uint64_t workspace_raw_bytes = 0;  // cudnn<B>Workspace.txt
};

enum class G10GraphKind { kTransformer, kCnn };

struct G10Model {
  std::string model;
  G10GraphKind kind = G10GraphKind::kTransformer;
  int batch = 0;
  int border = 0;                 // transformer: ids below it are global (CNN: 0)
  int input_size = 0;             // CNN: input image height = width (transformer: 0)
  std::vector<G10Tensor> tensors;  // in G10's creation order (its tensor ids)
  std::vector<G10Kernel> kernels;  // in G10's scheduling order (its kernel ids)
  int forward_kernels = 0;         // before makeLoss
  int workspace_tensors = 0;       // appended after the graph's tensors
  uint64_t global_bytes = 0;       // sum of global tensors' page-rounded sizes
  uint64_t intermediate_bytes = 0; // sum of the others'
};

// G10's `borden` (trans_borden) for a transformer model it ships: 210 for
// BERT models, 184 for ViT; 0 otherwise. Transformer graphs need one (pass it
// for other models); CNN graphs use none, since their globals are the layers'
// weights, BatchNorm parameters and running statistics, and Linear biases.
int G10DefaultBorder(const std::string& model);

// G10's input_H = input_W for a CNN model, as its artifact configures them:
// 299 for Inception models, 224 for the others.
int G10DefaultInputSize(const std::string& model);

// Parses one per-kernel file already in memory (`cudnn<B>*.txt`): line i is
// `<i> <value> <unit>`, every kernel in order, values finite and in
// 0..1e12. `source` names the file in errors ("<source>:<line>: ...").
absl::StatusOr<std::vector<double>> ParseG10PerKernelFile(const std::string& text,
                                                          const std::string& source,
                                                          const std::string& unit);

// Reads `<dir>/frontend/Nets/<model>.txt` (a transformer graph if it starts
// with an op id, else a CNN graph) and the four
// `<dir>/results/<model>/cudnn<batch>*.txt` files. For transformer graphs,
// `border` <= 0 means G10DefaultBorder(model); CNN graphs take none (a
// positive border is an error). Errors name file:line and what to do.
absl::StatusOr<G10Model> LoadG10Model(const std::string& dir, const std::string& model,
                                      int batch, int border = 0);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_GRAPH_H_
