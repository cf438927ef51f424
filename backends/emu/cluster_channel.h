// One direction of conversation between two processes of the uffd cluster
// (backends/emu/uffd_cluster.h): a Unix stream socket carrying framed
// messages. A message is a fixed header (kind, a device, a block, two page
// masks, a status) and a payload (page bytes, a plan's actions, an error's
// text). Requests and replies alternate on a channel; the client side holds
// the channel's mutex over its round trip, so that threads of one process
// may share it.
#ifndef UMLAB_BACKENDS_EMU_CLUSTER_CHANNEL_H_
#define UMLAB_BACKENDS_EMU_CLUSTER_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

enum class ClusterMessageKind : uint32_t {
  // To a block's descriptor owner (steps 4 to 7 and 11 of §6.3; eviction).
  kLock = 1,
  kResolve,
  kUnlock,
  kEvict,
  kSetReadOnly,  // from the host, at a launch (§6.4)
  kEndKernel,    // from the host, after the barrier (§6.3)
  // To a page's holder: a device's server, or the host's.
  kDowngrade,
  kFetch,
  kUnmap,
  kWriteBack,
  // The audit at a kernel end (from the host): an owner's masks, a device's
  // page table as the kernel has it.
  kAuditMasks,
  kAuditPages,
  // Between the coordinator and a device's main thread.
  kRunKernel,
  kCopyOut,  // `read` set: give up every array's pages, not only the copied-out ones
  kStats,
  kQuit,
  kError,  // a process failed: the payload says how
  kReply,
};

struct ClusterMessage {
  ClusterMessageKind kind = ClusterMessageKind::kReply;
  int32_t device = 0;   // who asks, or whom it is about
  int32_t value = 0;    // a flag or a count, by kind
  uint64_t block = 0;
  PageMask read;
  PageMask write;
  std::string payload;
};

// An action of a plan on the wire (coherence_actions.h): a downgrade, a
// fetch, an unmap, by tag; or, in the kernel-end audit, the pages a device
// maps (by a directory's masks, or by its page table) and maps writable.
inline constexpr int32_t kActionDowngrade = 0, kActionFetch = 1, kActionUnmap = 2,
                         kActionMapped = 3, kActionWritable = 4;
struct ClusterAction {
  int32_t tag = 0;
  int32_t device = 0;
  uint64_t block = 0;
  PageMask pages;
};
std::string EncodeActions(const std::vector<ClusterAction>& actions);
absl::StatusOr<std::vector<ClusterAction>> DecodeActions(const std::string& payload);

// Sends and receives whole messages on a connected stream socket. Owns the
// descriptor.
class ClusterChannel {
 public:
  explicit ClusterChannel(int fd = -1) : fd_(fd) {}
  ~ClusterChannel() { Close(); }
  ClusterChannel(const ClusterChannel&) = delete;
  ClusterChannel& operator=(const ClusterChannel&) = delete;

  int fd() const { return fd_; }
  void Close();

  // Fails with the peer's end closed (it exited) or a socket error.
  absl::Status Send(const ClusterMessage& message);
  absl::StatusOr<ClusterMessage> Receive();
  // Send then Receive under the channel's mutex; a kError reply becomes an
  // error status with its text.
  absl::StatusOr<ClusterMessage> Call(const ClusterMessage& request);

 private:
  int fd_;
  std::mutex call_mutex_;
  std::mutex send_mutex_;  // replies from several threads (deferred grants)
};

// A server's loop: waits on `channels` (null entries are skipped) and on
// `stop_fd` (an eventfd), and passes each request received to
// handle(index, request). Returns OK once stop_fd is signalled, or a
// handler's first error. A channel whose client is gone is dropped.
absl::Status ServeChannels(const std::vector<ClusterChannel*>& channels, int stop_fd,
                           const std::function<absl::Status(int, ClusterMessage)>& handle);

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CLUSTER_CHANNEL_H_
