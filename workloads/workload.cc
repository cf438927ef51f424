#include "workloads/workload.h"

namespace umlab {

WorkloadRegistry& Workloads() {
  static WorkloadRegistry* registry = new WorkloadRegistry("workload");
  return *registry;
}

}  // namespace umlab
