// The `g10` workload: a G10 (MICRO'23) training iteration replayed as a
// umlab program. The graph and kernel times come from G10's published files
// (workloads/g10/g10_graph.h: transformer and CNN graphs); this file turns them
// into events.
//
// G10's memory layout is static, so the program is too: one kAlloc segment
// covers every tensor (globals first, then intermediates, each at its G10
// offset; the segment is rounded to 2 MiB), weights are activated once and
// stay active, and each intermediate is activated before the first kernel
// that touches it and deactivated after the last one, in every iteration.
// Kernels run in G10's order with its measured ideal time as duration_ns;
// each reads its G10 input set and writes its output set, whole tensors.
#ifndef UMLAB_WORKLOADS_G10_G10_WORKLOAD_H_
#define UMLAB_WORKLOADS_G10_G10_WORKLOAD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/event_source.h"
#include "workloads/g10/g10_graph.h"

namespace umlab {

// Where `dir` points when not given: the G10 samples in the checkout umlab
// was built from (data/g10: BERT_Base at batch 256, ResNet152 at 1280), so
// `--workload=g10` works in a plain clone, from any directory.
inline constexpr char kDefaultG10Dir[] = UMLAB_G10_SAMPLE_DIR;

// The segment's base address: 2 MiB aligned, like the caching allocator's.
inline constexpr uint64_t kG10DeviceBase = 0x7f0000000000;

// A stream of the program's events for `iterations` iterations.
std::unique_ptr<EventSource> OpenG10Program(std::shared_ptr<const G10Model> model,
                                            int iterations);

// The footprint and shape, for `umlab workloads --describe g10`.
std::string DescribeG10Model(const G10Model& model);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_G10_G10_WORKLOAD_H_
