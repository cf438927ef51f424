#include "backends/emu/cluster_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"

namespace umlab {
namespace {

struct WireHeader {
  uint32_t kind;
  int32_t device;
  int32_t value;
  uint32_t payload_bytes;
  uint64_t block;
  uint64_t read[kPageMaskWords];
  uint64_t write[kPageMaskWords];
};

struct WireAction {
  int32_t tag;
  int32_t device;
  uint64_t block;
  uint64_t pages[kPageMaskWords];
};

void PackMask(const PageMask& mask, uint64_t* words) {
  for (int w = 0; w < kPageMaskWords; ++w) words[w] = 0;
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if (mask.test(page)) words[page / 64] |= uint64_t{1} << (page % 64);
  }
}

PageMask UnpackMask(const uint64_t* words) {
  PageMask mask;
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if ((words[page / 64] >> (page % 64)) & 1) mask.set(page);
  }
  return mask;
}

absl::Status SendAll(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t sent = send(fd, data, bytes, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) {
      return absl::UnavailableError(
          absl::StrFormat("cluster channel: send failed (%s)", std::strerror(errno)));
    }
    data += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

absl::Status ReceiveAll(int fd, char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t got = recv(fd, data, bytes, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) return absl::UnavailableError("cluster channel: the peer process is gone");
    if (got < 0) {
      return absl::UnavailableError(
          absl::StrFormat("cluster channel: receive failed (%s)", std::strerror(errno)));
    }
    data += got;
    bytes -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeActions(const std::vector<ClusterAction>& actions) {
  std::string out(actions.size() * sizeof(WireAction), '\0');
  for (size_t i = 0; i < actions.size(); ++i) {
    WireAction wire{};
    wire.tag = actions[i].tag;
    wire.device = actions[i].device;
    wire.block = actions[i].block;
    PackMask(actions[i].pages, wire.pages);
    std::memcpy(out.data() + i * sizeof(WireAction), &wire, sizeof(wire));
  }
  return out;
}

absl::StatusOr<std::vector<ClusterAction>> DecodeActions(const std::string& payload) {
  if (payload.size() % sizeof(WireAction) != 0) {
    return absl::DataLossError("cluster channel: a plan's actions are cut short");
  }
  std::vector<ClusterAction> actions(payload.size() / sizeof(WireAction));
  for (size_t i = 0; i < actions.size(); ++i) {
    WireAction wire;
    std::memcpy(&wire, payload.data() + i * sizeof(WireAction), sizeof(wire));
    actions[i] = ClusterAction{wire.tag, wire.device, wire.block, UnpackMask(wire.pages)};
  }
  return actions;
}

void ClusterChannel::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

absl::Status ClusterChannel::Send(const ClusterMessage& message) {
  WireHeader header{};
  header.kind = static_cast<uint32_t>(message.kind);
  header.device = message.device;
  header.value = message.value;
  header.payload_bytes = static_cast<uint32_t>(message.payload.size());
  header.block = message.block;
  PackMask(message.read, header.read);
  PackMask(message.write, header.write);
  std::lock_guard<std::mutex> lock(send_mutex_);
  if (absl::Status status = SendAll(fd_, reinterpret_cast<const char*>(&header), sizeof(header));
      !status.ok()) {
    return status;
  }
  return SendAll(fd_, message.payload.data(), message.payload.size());
}

absl::StatusOr<ClusterMessage> ClusterChannel::Receive() {
  WireHeader header;
  if (absl::Status status = ReceiveAll(fd_, reinterpret_cast<char*>(&header), sizeof(header));
      !status.ok()) {
    return status;
  }
  ClusterMessage message;
  message.kind = static_cast<ClusterMessageKind>(header.kind);
  message.device = header.device;
  message.value = header.value;
  message.block = header.block;
  message.read = UnpackMask(header.read);
  message.write = UnpackMask(header.write);
  message.payload.resize(header.payload_bytes);
  if (absl::Status status = ReceiveAll(fd_, message.payload.data(), message.payload.size());
      !status.ok()) {
    return status;
  }
  return message;
}

absl::StatusOr<ClusterMessage> ClusterChannel::Call(const ClusterMessage& request) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (absl::Status status = Send(request); !status.ok()) return status;
  absl::StatusOr<ClusterMessage> reply = Receive();
  if (reply.ok() && reply->kind == ClusterMessageKind::kError) {
    return absl::InternalError(reply->payload);
  }
  return reply;
}

absl::Status ServeChannels(const std::vector<ClusterChannel*>& channels, int stop_fd,
                           const std::function<absl::Status(int, ClusterMessage)>& handle) {
  std::vector<pollfd> fds;
  std::vector<int> index_of;
  fds.push_back(pollfd{stop_fd, POLLIN, 0});
  index_of.push_back(-1);
  for (size_t i = 0; i < channels.size(); ++i) {
    if (channels[i] == nullptr || channels[i]->fd() < 0) continue;
    fds.push_back(pollfd{channels[i]->fd(), POLLIN, 0});
    index_of.push_back(static_cast<int>(i));
  }
  while (true) {
    const int ready = poll(fds.data(), fds.size(), -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrFormat("cluster server: poll (%s)", std::strerror(errno)));
    }
    if (fds[0].revents != 0) return absl::OkStatus();
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      absl::StatusOr<ClusterMessage> request = channels[index_of[i]]->Receive();
      if (!request.ok()) {
        // A client that is gone asks nothing more; those waiting on it learn
        // of it from their own channels.
        fds[i].fd = -1;
        continue;
      }
      if (absl::Status status = handle(index_of[i], *std::move(request)); !status.ok()) {
        return status;
      }
    }
  }
}

}  // namespace umlab
