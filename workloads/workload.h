// A workload: a deterministic program of allocations, kernels and accesses
// that every backend can run. Generators register themselves by name.
#ifndef UMLAB_WORKLOADS_WORKLOAD_H_
#define UMLAB_WORKLOADS_WORKLOAD_H_

#include <memory>
#include <string>

#include "core/compute_spec.h"
#include "core/event_source.h"
#include "core/registry.h"

namespace umlab {

class Workload {
 public:
  virtual ~Workload() = default;

  // A fresh stream of the program's events. The same workload object gives
  // the same stream every time, so a run can pre-scan the program (for its
  // footprint) and then execute it.
  virtual std::unique_ptr<EventSource> Open() const = 0;

  // A few lines on the workload's structure and footprint, for
  // `umlab workloads --describe`.
  virtual std::string Describe() const = 0;
};

using WorkloadRegistry = Registry<Workload, const ComputeSpec&>;

// The process-wide registry every generator adds itself to.
WorkloadRegistry& Workloads();

}  // namespace umlab

// Registers a workload from a source file's static initialisation:
//   UMLAB_REGISTER_WORKLOAD(mlp, {"mlp", "description", {params...}, factory});
#define UMLAB_REGISTER_WORKLOAD(id, ...)                               \
  [[maybe_unused]] static const bool umlab_workload_registered_##id = \
      ::umlab::Workloads().Register(__VA_ARGS__)

#endif  // UMLAB_WORKLOADS_WORKLOAD_H_
