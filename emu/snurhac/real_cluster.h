// SnuRHAC's cluster on real processes rather than in virtual time: what
// such a run is asked and what it reports, and the runners by name. The
// uffd backend registers "uffd" (backends/emu/uffd_cluster.h); `umlab
// snurhac --backend=uffd` finds it here, since the CLI sees the device
// model's layer and not the backends'.
#ifndef UMLAB_EMU_SNURHAC_REAL_CLUSTER_H_
#define UMLAB_EMU_SNURHAC_REAL_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/grid_program.h"
#include "emu/snurhac/cluster_sim.h"

namespace umlab::snurhac {

struct RealClusterRequest {
  int devices = 1;
  int threads = 2;  // worker threads per device
  bool verify = true;
  // Fail, stopping every device, when no device reports for this long.
  int watchdog_s = 60;
};

struct RealClusterResult {
  int64_t wall_ns = 0;  // from starting the processes to the end of the copy-out
  int kernels = 0;
  int single_device_kernels = 0;
  // Counters as the sim's (ClusterDeviceStats), until the copy-out ends.
  std::vector<ClusterDeviceStats> devices;
  ClusterDeviceStats total;
  // Reads during the kernels that saw a value they may not see.
  uint64_t read_mismatches = 0;
  // Words of the final memory that differ from the sequential run (verify).
  uint64_t final_mismatches = 0;
  uint64_t checked_words = 0;
  // Pages whose real mapping (a device's page table) differed from the
  // directory's masks, at the kernel ends (verify): each kernel's barrier,
  // before and after its unmaps.
  uint64_t audit_mismatches = 0;
  std::string first_mismatch;  // empty if none
};

using RealClusterRunner = std::function<absl::StatusOr<RealClusterResult>(
    const GridProgram& program, const RealClusterRequest& request)>;

// For static registration; returns true.
bool RegisterRealClusterRunner(const std::string& name, RealClusterRunner runner);
// Null if no runner has that name.
const RealClusterRunner* FindRealClusterRunner(const std::string& name);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_REAL_CLUSTER_H_
