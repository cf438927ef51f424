// Fuzzes G10's graph parsers (workloads/g10/g10_transformer_graph.h,
// g10_cnn_graph.h and the PyTorch-print parser under it) as LoadG10Model
// picks between them: a graph starting with a digit is a transformer token
// stream, anything else a CNN print. Input: one byte choosing the batch and
// the border, then the graph text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "workloads/g10/g10_cnn_graph.h"
#include "workloads/g10/g10_transformer_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Batches 1..16 keep the shapes (and so the fuzzer's memory) small; the
  // parsers bound every dimension they read, whatever the batch.
  const int batch = 1 + (data[0] & 15);
  const int border = (data[0] >> 4) * 16;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const absl::string_view head = absl::StripLeadingAsciiWhitespace(text);
  absl::StatusOr<umlab::G10Model> model =
      !head.empty() && absl::ascii_isdigit(static_cast<unsigned char>(head[0]))
          ? umlab::ParseG10TransformerGraph(text, "fuzz.txt", batch, border)
          : umlab::ParseG10CnnGraph(text, "fuzz.txt", batch, 224);
  if (!model.ok()) return 0;
  // Every kernel names tensors the model has.
  for (const umlab::G10Kernel& kernel : model->kernels) {
    for (const auto* list : {&kernel.inputs, &kernel.outputs}) {
      for (int tensor : *list) {
        if (tensor < 0 || static_cast<size_t>(tensor) >= model->tensors.size()) std::abort();
      }
    }
  }
  return 0;
}
