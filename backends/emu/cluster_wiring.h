// How the processes of the uffd cluster (backends/emu/uffd_cluster.h) are
// connected: a Unix stream socket pair for every ordered pair (client,
// server) of processes that talk, made before the fork, plus a control
// pair between the coordinator and each device. Process 0 is the host (the
// coordinator); process 1 + d is device d.
#ifndef UMLAB_BACKENDS_EMU_CLUSTER_WIRING_H_
#define UMLAB_BACKENDS_EMU_CLUSTER_WIRING_H_

#include <vector>

#include "absl/status/statusor.h"

namespace umlab {

class ClusterWiring {
 public:
  // Makes every socket pair for `devices` devices.
  static absl::StatusOr<ClusterWiring> Create(int devices);
  ClusterWiring() = default;
  ClusterWiring(ClusterWiring&& other) noexcept { *this = std::move(other); }
  ClusterWiring& operator=(ClusterWiring&& other) noexcept;
  ~ClusterWiring() { CloseAll(); }

  int devices() const { return devices_; }
  // The descriptors `process` keeps, taken out of the wiring (the caller
  // owns them); every other descriptor is closed. Call once, after the
  // fork, in each process. Indexed by process: client_to[p] talks to p's
  // server, server_from[p] answers p; -1 where no channel exists.
  struct Ends {
    std::vector<int> client_to;
    std::vector<int> server_from;
    // Device: its end of the control pair. Host: one per device.
    std::vector<int> control;
  };
  Ends TakeEnds(int process);
  void CloseAll();

 private:
  static int Index(int client, int server, int processes) { return client * processes + server; }
  int devices_ = 0;
  // Per (client, server): [0] the client's end, [1] the server's; -1 if none.
  std::vector<int> pairs_;
  std::vector<int> control_;  // per device: [2d] host end, [2d + 1] device end
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CLUSTER_WIRING_H_
