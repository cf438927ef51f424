// embedding_dense_backward as PyTorch 2.11 runs it on CUDA
// (aten/src/ATen/native/cuda/Embedding.cu), read off the profiler:
//
// - Up to 3,072 lookups: the gradient zeroed, then one
//   embedding_backward_feature_kernel that adds each row (GPT-2 at batch 1).
// - More: the indices are sorted so that rows are summed without atomics:
//   a copy of the ids and an iota of their positions (int64 workspace), a
//   radix sort of the 64-bit keys (a histogram, an exclusive sum and eight
//   one-sweep passes), the gradient zeroed, then the segment reduction:
//   unique-by-key over the sorted ids (two kernels), segment offsets, a
//   scan (two), partial segments per segment, their offsets, the partial
//   sums (a float workspace of one row per lookup at most) and the scatter
//   into the gradient. 22 kernels (BERT at batch 8: 4,096 lookups).
#include "absl/strings/str_cat.h"
#include "workloads/dnn/training_graph.h"

namespace umlab {
namespace {

constexpr uint64_t kMaxLookupsWithoutSort = 3072;
constexpr int kRadixSortPasses = 8;  // 64-bit keys, 8 bits a pass

}  // namespace

int TrainingGraph::EmbeddingDenseBackward(const EmbeddingLayer& layer, int ids, uint64_t count,
                                          int gy) {
  const std::string shape = absl::StrCat(count, "x", layer.dim);
  const std::string name = layer.name + ".embedding_bwd";
  const double row_flops = D(count * layer.dim);
  const int gw = Grad(layer.weight, Bytes(layer.weight));
  if (count <= kMaxLookupsWithoutSort) {
    Kernel(name + "_zero_" + shape, 0, false, {W(gw)});
    Kernel(name + "_" + shape, row_flops, false, {R(gy), R(ids), W(gw)});
    return gw;
  }
  const int sorted = Workspace(layer.name + ".sorted_indices", count * 8);
  const int positions = Workspace(layer.name + ".orig_indices", count * 8);
  Kernel(name + "_index_copy_" + shape, 0, false, {R(ids), W(sorted)});
  Kernel(name + "_iota_" + shape, 0, false, {W(positions)});
  Kernel(name + "_sort_histogram_" + shape, 0, false, {R(sorted)});
  Kernel(name + "_sort_exclusive_sum_" + shape, 0, false, {});
  for (int pass = 0; pass < kRadixSortPasses; ++pass) {
    Kernel(absl::StrCat(name, "_sort_pass", pass, "_", shape), 0, false,
           {R(sorted), R(positions), W(sorted), W(positions)});
  }
  Kernel(name + "_zero_" + shape, 0, false, {W(gw)});
  const int segments = Workspace(layer.name + ".segment_offsets", count * 8);
  Kernel(name + "_unique_init_" + shape, 0, false, {});
  Kernel(name + "_unique_by_key_" + shape, 0, false, {R(sorted), W(segments)});
  Kernel(name + "_segment_offsets_" + shape, 0, false, {R(segments), W(segments)});
  Kernel(name + "_scan_init_" + shape, 0, false, {});
  Kernel(name + "_scan_" + shape, 0, false, {R(segments), W(segments)});
  Kernel(name + "_partials_per_segment_" + shape, 0, false, {R(segments), W(segments)});
  Kernel(name + "_partial_segment_offsets_" + shape, 0, false, {R(segments), W(segments)});
  const int partials = Workspace(layer.name + ".partial_sums", count * layer.dim * 4);
  Kernel(name + "_partial_sums_" + shape, row_flops, false,
         {R(gy), R(positions), R(segments), W(partials)});
  Unref(positions);
  Kernel(name + "_sum_and_scatter_" + shape, row_flops, false,
         {R(partials), R(sorted), R(segments), W(gw)});
  Unref(partials);
  Unref(segments);
  Unref(sorted);
  return gw;
}

}  // namespace umlab
