#include "backends/emu/cluster_wiring.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"

namespace umlab {

absl::StatusOr<ClusterWiring> ClusterWiring::Create(int devices) {
  ClusterWiring wiring;
  wiring.devices_ = devices;
  const int processes = devices + 1;
  wiring.pairs_.assign(static_cast<size_t>(processes * processes) * 2, -1);
  wiring.control_.assign(static_cast<size_t>(devices) * 2, -1);
  auto make_pair = [](int* ends) -> absl::Status {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("uffd cluster: socketpair failed (%s)", std::strerror(errno)));
    }
    return absl::OkStatus();
  };
  for (int client = 0; client < processes; ++client) {
    for (int server = 0; server < processes; ++server) {
      // The host serves devices only; it asks devices, never itself.
      if (client == 0 && server == 0) continue;
      int* ends = &wiring.pairs_[static_cast<size_t>(Index(client, server, processes)) * 2];
      if (absl::Status status = make_pair(ends); !status.ok()) return status;
    }
  }
  for (int device = 0; device < devices; ++device) {
    if (absl::Status status = make_pair(&wiring.control_[static_cast<size_t>(device) * 2]);
        !status.ok()) {
      return status;
    }
  }
  return wiring;
}

ClusterWiring& ClusterWiring::operator=(ClusterWiring&& other) noexcept {
  CloseAll();
  devices_ = other.devices_;
  pairs_ = std::move(other.pairs_);
  control_ = std::move(other.control_);
  other.pairs_.clear();
  other.control_.clear();
  return *this;
}

ClusterWiring::Ends ClusterWiring::TakeEnds(int process) {
  const int processes = devices_ + 1;
  Ends ends;
  ends.client_to.assign(processes, -1);
  ends.server_from.assign(processes, -1);
  for (int other = 0; other < processes; ++other) {
    int& client_end = pairs_[static_cast<size_t>(Index(process, other, processes)) * 2];
    ends.client_to[other] = std::exchange(client_end, -1);
    int& server_end = pairs_[static_cast<size_t>(Index(other, process, processes)) * 2 + 1];
    ends.server_from[other] = std::exchange(server_end, -1);
  }
  if (process == 0) {
    for (int device = 0; device < devices_; ++device) {
      ends.control.push_back(std::exchange(control_[static_cast<size_t>(device) * 2], -1));
    }
  } else {
    ends.control.push_back(std::exchange(control_[static_cast<size_t>(process - 1) * 2 + 1], -1));
  }
  CloseAll();
  return ends;
}

void ClusterWiring::CloseAll() {
  for (int& fd : pairs_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  for (int& fd : control_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

}  // namespace umlab
