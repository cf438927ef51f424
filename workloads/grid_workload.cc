#include "workloads/grid_workload.h"

namespace umlab {

GridWorkloadRegistry& GridWorkloads() {
  static GridWorkloadRegistry* registry = new GridWorkloadRegistry("grid program");
  return *registry;
}

}  // namespace umlab
