#include "backends/emu/uffd_cluster.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <map>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "backends/emu/cluster_channel.h"
#include "backends/emu/cluster_reference.h"
#include "backends/emu/cluster_wiring.h"
#include "emu/snurhac/coherence_actions.h"
#include "emu/snurhac/descriptor_owner.h"
#include "emu/snurhac/launch_plan.h"

namespace umlab {
namespace {

using snurhac::ClusterDeviceStats;
using Kind = ClusterMessageKind;

// The host (node 0): its UM space, served to the devices, and the run.
class Coordinator {
 public:
  Coordinator(const GridProgram& program, const UffdClusterOptions& options)
      : program_(program), options_(options) {}
  ~Coordinator() { Shutdown(); }

  absl::StatusOr<UffdClusterResult> Run();

 private:
  absl::Status Start();
  // Serves the devices' fetches from and write-backs to the host's memory.
  absl::Status ServeHost(ClusterMessage request, ClusterChannel& channel);
  // Sends `command` to every device and waits for every reply, under the
  // watchdog; a device's error or death fails the run.
  absl::StatusOr<std::vector<ClusterMessage>> Broadcast(const ClusterMessage& command);
  absl::StatusOr<std::vector<ClusterMessage>> AwaitAll();
  absl::Status Died(int device);
  // Asks a device to carry out `actions` (downgrades or kernel-end unmaps).
  absl::Status CarryOut(const std::vector<ClusterAction>& actions, bool kernel_end);
  absl::Status Launch(int index, UffdClusterResult& result);
  absl::Status EndKernel();
  // Compares every device's page table with the owners' masks (verify).
  absl::Status Audit(const std::string& when, UffdClusterResult& result);
  void Shutdown();

  const GridProgram& program_;
  const UffdClusterOptions options_;
  uint64_t bytes_ = 0;
  char* host_ = nullptr;
  std::mutex host_mutex_;
  // Pages of the host's UM space that hold data: copied in, or written
  // back since (the rest have never held any and are zero-filled).
  absl::flat_hash_map<BlockNumber, PageMask> host_data_;
  std::vector<pid_t> pids_;
  std::vector<std::unique_ptr<ClusterChannel>> clients_;  // to device servers, by device
  std::vector<std::unique_ptr<ClusterChannel>> servers_;  // from devices, by device
  std::vector<std::unique_ptr<ClusterChannel>> control_;  // by device
  int stop_fd_ = -1;
  std::thread server_;
  absl::Status server_status_;  // under host_mutex_
};

absl::Status Coordinator::Start() {
  for (const GridArray& array : program_.arrays) {
    bytes_ = std::max(bytes_, array.address + array.bytes);
  }
  bytes_ = (bytes_ + kBlockSize - 1) / kBlockSize * kBlockSize;
  void* host = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (host == MAP_FAILED) return absl::ResourceExhaustedError("uffd cluster: no host memory");
  host_ = static_cast<char*>(host);
  // The program's inputs, copied into the host's UM space (§6.1).
  auto* words = reinterpret_cast<uint32_t*>(host_);
  for (const GridArray& array : program_.arrays) {
    if (!array.copied_in) continue;
    for (uint64_t word = FirstWord(array.range()); word < EndWord(array.range()); ++word) {
      words[word] = WordValue(kCopiedIn, word);
    }
    for (BlockNumber block = BlockOfAddress(array.address);
         block <= BlockOfAddress(array.address + array.bytes - 1); ++block) {
      host_data_[block] |= PagesOfArray(array, block);
    }
  }
  absl::StatusOr<ClusterWiring> wiring = ClusterWiring::Create(options_.devices);
  if (!wiring.ok()) return wiring.status();
  const pid_t parent = getpid();
  for (int device = 0; device < options_.devices; ++device) {
    const pid_t pid = fork();
    if (pid < 0) return absl::ResourceExhaustedError("uffd cluster: fork failed");
    if (pid == 0) {
      // A device process: it dies with the coordinator, never outlives it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      ClusterDeviceOptions device_options;
      device_options.device = device;
      device_options.devices = options_.devices;
      device_options.threads = options_.threads;
      device_options.inject = options_.inject;
      device_options.crash_at_first_kernel = options_.crash_device_for_testing && device == 0;
      _exit(RunClusterDevice(program_, device_options, wiring->TakeEnds(device + 1)));
    }
    pids_.push_back(pid);
  }
  ClusterWiring::Ends ends = wiring->TakeEnds(0);
  for (int device = 0; device < options_.devices; ++device) {
    clients_.push_back(std::make_unique<ClusterChannel>(ends.client_to[device + 1]));
    servers_.push_back(std::make_unique<ClusterChannel>(ends.server_from[device + 1]));
    control_.push_back(std::make_unique<ClusterChannel>(ends.control[device]));
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) return absl::ResourceExhaustedError("uffd cluster: eventfd failed");
  std::vector<ClusterChannel*> servers;
  for (auto& channel : servers_) servers.push_back(channel.get());
  server_ = std::thread([this, servers] {
    absl::Status status = ServeChannels(servers, stop_fd_, [this, servers](int device,
                                                                          ClusterMessage m) {
      return ServeHost(std::move(m), *servers[device]);
    });
    if (status.ok()) return;
    // The devices waiting on the host learn of it as a closed channel.
    for (ClusterChannel* channel : servers) shutdown(channel->fd(), SHUT_RDWR);
    std::lock_guard<std::mutex> lock(host_mutex_);
    server_status_ = status;
  });
  // Every device has registered its range.
  return AwaitAll().status();
}

absl::Status Coordinator::ServeHost(ClusterMessage request, ClusterChannel& channel) {
  ClusterMessage reply;
  reply.kind = Kind::kReply;
  reply.block = request.block;
  const BlockNumber block = request.block;
  if ((block + 1) * kBlockSize > bytes_) {
    return absl::InternalError(absl::StrFormat("host: block %d is outside the program", block));
  }
  std::lock_guard<std::mutex> lock(host_mutex_);
  PageMask& with_data = host_data_[block];
  if (request.kind == Kind::kFetch) {
    reply.write = request.read & with_data;
    ForEachPageRun(reply.write, [&](int first, int count) {
      reply.payload.append(host_ + block * kBlockSize + static_cast<uint64_t>(first) * kPageSize,
                           static_cast<uint64_t>(count) * kPageSize);
    });
  } else if (request.kind == Kind::kWriteBack) {
    if (request.payload.size() != MaskBytes(request.read)) {
      return absl::DataLossError("host: a write-back came cut short");
    }
    uint64_t offset = 0;
    ForEachPageRun(request.read, [&](int first, int count) {
      const uint64_t length = static_cast<uint64_t>(count) * kPageSize;
      std::memcpy(host_ + block * kBlockSize + static_cast<uint64_t>(first) * kPageSize,
                  request.payload.data() + offset, length);
      offset += length;
    });
    with_data |= request.read;
  } else {
    return absl::InternalError("host: a request it does not serve");
  }
  return channel.Send(reply);
}

absl::Status Coordinator::Died(int device) {
  int status = 0;
  std::string how = "closed its channel";
  for (int tries = 0; tries < 100; ++tries) {
    const pid_t got = waitpid(pids_[device], &status, WNOHANG);
    if (got == pids_[device]) {
      pids_[device] = -1;
      how = WIFSIGNALED(status) ? absl::StrFormat("was killed by signal %d", WTERMSIG(status))
                                : absl::StrFormat("exited with status %d", WEXITSTATUS(status));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::AbortedError(absl::StrFormat(
      "uffd cluster: device %d's process %s mid-run; the run is void", device, how));
}

absl::StatusOr<std::vector<ClusterMessage>> Coordinator::AwaitAll() {
  std::vector<ClusterMessage> replies(options_.devices);
  std::vector<bool> done(options_.devices, false);
  int remaining = options_.devices;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.watchdog_s);
  while (remaining > 0) {
    std::vector<pollfd> fds;
    std::vector<int> device_of;
    for (int device = 0; device < options_.devices; ++device) {
      if (done[device]) continue;
      fds.push_back(pollfd{control_[device]->fd(), POLLIN, 0});
      device_of.push_back(device);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "uffd cluster: no progress for %d s (%d devices have not reported); the run is "
          "stopped, raise --watchdog-s if the program is that slow",
          options_.watchdog_s, remaining));
    }
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return absl::InternalError("uffd cluster: poll failed");
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int device = device_of[i];
      absl::StatusOr<ClusterMessage> reply = control_[device]->Receive();
      if (!reply.ok()) return Died(device);
      if (reply->kind == Kind::kError) {
        // A device that fails because a peer vanished under it reports
        // that; the peer's death is the cause to name.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (int other = 0; other < options_.devices; ++other) {
          int status = 0;
          if (pids_[other] > 0 && waitpid(pids_[other], &status, WNOHANG) == pids_[other]) {
            pids_[other] = -1;
            if (WIFSIGNALED(status)) {
              return absl::AbortedError(absl::StrFormat(
                  "uffd cluster: device %d's process was killed by signal %d mid-run; the run is "
                  "void",
                  other, WTERMSIG(status)));
            }
          }
        }
        return absl::InternalError(reply->payload);
      }
      replies[device] = *std::move(reply);
      done[device] = true;
      --remaining;
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.watchdog_s);
    }
    {
      std::lock_guard<std::mutex> lock(host_mutex_);
      if (!server_status_.ok()) return server_status_;
    }
  }
  return replies;
}

absl::StatusOr<std::vector<ClusterMessage>> Coordinator::Broadcast(const ClusterMessage& command) {
  for (int device = 0; device < options_.devices; ++device) {
    if (!control_[device]->Send(command).ok()) return Died(device);
  }
  return AwaitAll();
}

absl::Status Coordinator::CarryOut(const std::vector<ClusterAction>& actions, bool kernel_end) {
  for (const ClusterAction& action : actions) {
    ClusterMessage request;
    request.kind = kernel_end ? Kind::kUnmap : Kind::kDowngrade;
    request.device = snurhac::kHost;
    request.value = kernel_end ? 1 : 0;
    request.block = action.block;
    request.read = action.pages;
    if (absl::Status status = clients_[action.device]->Call(request).status(); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Launch(int index, UffdClusterResult& result) {
  const GridKernel& kernel = program_.launches[index];
  absl::StatusOr<snurhac::LaunchPlan> plan =
      snurhac::PlanLaunch(program_, kernel, options_.devices);
  if (!plan.ok()) return plan.status();
  ++result.kernels;
  if (plan->single_device) ++result.single_device_kernels;
  // §6.4: the read-only flags, at each block's descriptor owner; setting one
  // downgrades the block's writer, acknowledged before the launch.
  for (const auto& [array_index, only_read] : plan->only_read) {
    const GridArray& array = program_.arrays[array_index];
    for (BlockNumber block = BlockOfAddress(array.address);
         block <= BlockOfAddress(array.address + array.bytes - 1); ++block) {
      ClusterMessage request;
      request.kind = Kind::kSetReadOnly;
      request.device = snurhac::kHost;
      request.block = block;
      request.value = only_read ? 1 : 0;
      absl::StatusOr<ClusterMessage> reply =
          clients_[snurhac::DescriptorOwner(block, options_.devices)]->Call(request);
      if (!reply.ok()) return reply.status();
      absl::StatusOr<std::vector<ClusterAction>> downgrades = DecodeActions(reply->payload);
      if (!downgrades.ok()) return downgrades.status();
      if (absl::Status status = CarryOut(*downgrades, false); !status.ok()) return status;
    }
  }
  ClusterMessage run;
  run.kind = Kind::kRunKernel;
  run.value = index;
  absl::StatusOr<std::vector<ClusterMessage>> done = Broadcast(run);
  if (!done.ok()) return done.status();
  for (const ClusterMessage& reply : *done) {
    result.read_mismatches += static_cast<uint64_t>(reply.value);
    if (result.first_mismatch.empty() && !reply.payload.empty()) {
      result.first_mismatch = reply.payload;
    }
  }
  return absl::OkStatus();
}

absl::Status Coordinator::EndKernel() {
  // §6.3: every device has finished (the barrier above); each owner's
  // directory names the readers to unmap, who unmap before the next launch.
  for (int owner = 0; owner < options_.devices; ++owner) {
    ClusterMessage request;
    request.kind = Kind::kEndKernel;
    request.device = snurhac::kHost;
    absl::StatusOr<ClusterMessage> reply = clients_[owner]->Call(request);
    if (!reply.ok()) return reply.status();
    absl::StatusOr<std::vector<ClusterAction>> unmaps = DecodeActions(reply->payload);
    if (!unmaps.ok()) return unmaps.status();
    if (absl::Status status = CarryOut(*unmaps, true); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status Coordinator::Audit(const std::string& when, UffdClusterResult& result) {
  // Per (device, block): the masks' mapped and writable pages, then the
  // page table's.
  std::map<std::pair<int, BlockNumber>, std::array<PageMask, 4>> pages;
  auto collect = [&](Kind kind, int offset) -> absl::Status {
    for (int device = 0; device < options_.devices; ++device) {
      ClusterMessage request;
      request.kind = kind;
      request.device = snurhac::kHost;
      absl::StatusOr<ClusterMessage> reply = clients_[device]->Call(request);
      if (!reply.ok()) return reply.status();
      absl::StatusOr<std::vector<ClusterAction>> actions = DecodeActions(reply->payload);
      if (!actions.ok()) return actions.status();
      for (const ClusterAction& action : *actions) {
        pages[{action.device, action.block}][offset + (action.tag == kActionMapped ? 0 : 1)] =
            action.pages;
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status status = collect(Kind::kAuditMasks, 0); !status.ok()) return status;
  if (absl::Status status = collect(Kind::kAuditPages, 2); !status.ok()) return status;
  for (const auto& [key, masks] : pages) {
    const PageMask wrong = (masks[0] ^ masks[2]) | (masks[1] ^ masks[3]);
    if (wrong.none()) continue;
    if (result.audit_mismatches == 0 && result.first_mismatch.empty()) {
      int page = 0;
      while (!wrong.test(page)) ++page;
      auto state = [&](const PageMask& mapped, const PageMask& writable) {
        return !mapped.test(page) ? "unmapped" : writable.test(page) ? "read-write" : "read-only";
      };
      result.first_mismatch = absl::StrFormat(
          "%s: device %d maps page %d (block %d) %s where the directory says %s", when, key.first,
          FirstPageOfBlock(key.second) + page, key.second, state(masks[2], masks[3]),
          state(masks[0], masks[1]));
    }
    result.audit_mismatches += wrong.count();
  }
  return absl::OkStatus();
}

absl::StatusOr<UffdClusterResult> Coordinator::Run() {
  const auto start = std::chrono::steady_clock::now();
  if (absl::Status status = Start(); !status.ok()) return status;
  UffdClusterResult result;
  for (int index = 0; index < static_cast<int>(program_.launches.size()); ++index) {
    if (absl::Status status = Launch(index, result); !status.ok()) return status;
    const std::string kernel = absl::StrFormat("kernel %d (%s)", index,
                                               program_.launches[index].name);
    if (options_.verify) {
      if (absl::Status status = Audit(kernel + ", at the barrier", result); !status.ok()) {
        return status;
      }
    }
    if (absl::Status status = EndKernel(); !status.ok()) return status;
    if (options_.verify) {
      if (absl::Status status = Audit(kernel + ", after its unmaps", result); !status.ok()) {
        return status;
      }
    }
  }
  ClusterMessage copy_out;
  copy_out.kind = Kind::kCopyOut;
  if (absl::Status status = Broadcast(copy_out).status(); !status.ok()) return status;
  result.wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  ClusterMessage stats;
  stats.kind = Kind::kStats;
  absl::StatusOr<std::vector<ClusterMessage>> counters = Broadcast(stats);
  if (!counters.ok()) return counters.status();
  for (const ClusterMessage& reply : *counters) {
    ClusterDeviceStats s;
    if (reply.payload.size() != sizeof(s)) return absl::DataLossError("uffd cluster: bad counters");
    std::memcpy(&s, reply.payload.data(), sizeof(s));
    result.devices.push_back(s);
    result.total.Add(s);
  }
  if (options_.verify) {
    // Gather: every device gives up every page by the eviction rule, so the
    // host's memory holds the newest copy of everything.
    copy_out.value = 1;
    if (absl::Status status = Broadcast(copy_out).status(); !status.ok()) return status;
    ClusterReference reference(program_);
    for (int index = 0; index < static_cast<int>(program_.launches.size()); ++index) {
      reference.BeginKernel(index);
      reference.EndKernel();
    }
    std::lock_guard<std::mutex> lock(host_mutex_);
    const auto* words = reinterpret_cast<const uint32_t*>(host_);
    for (uint64_t word = 0; word < reference.words(); ++word) {
      ++result.checked_words;
      if (words[word] == reference.Expected(word)) continue;
      if (result.final_mismatches++ == 0 && result.first_mismatch.empty()) {
        result.first_mismatch = absl::StrFormat(
            "final memory: word %d (page %d) holds 0x%08x, the sequential run 0x%08x", word,
            word * kWordBytes / kPageSize, words[word], reference.Expected(word));
      }
    }
  }
  ClusterMessage quit;
  quit.kind = Kind::kQuit;
  if (absl::Status status = Broadcast(quit).status(); !status.ok()) return status;
  for (pid_t& pid : pids_) {
    int status = 0;
    if (waitpid(pid, &status, 0) == pid) pid = -1;
  }
  return result;
}

void Coordinator::Shutdown() {
  for (pid_t& pid : pids_) {
    if (pid <= 0) continue;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
  }
  if (server_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) std::abort();
    server_.join();
  }
  if (stop_fd_ >= 0) close(stop_fd_);
  stop_fd_ = -1;
  clients_.clear();
  servers_.clear();
  control_.clear();
  if (host_ != nullptr) munmap(host_, bytes_);
  host_ = nullptr;
}

}  // namespace

absl::StatusOr<UffdClusterResult> RunUffdCluster(const GridProgram& program,
                                                 const UffdClusterOptions& options) {
  if (options.devices < 1 || options.devices > kMaxUffdClusterDevices || options.threads < 1 ||
      options.watchdog_s < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the uffd cluster runs 1 to %d devices with at least one thread each and a watchdog of "
        "at least 1 s; not %d devices, %d threads, %d s",
        kMaxUffdClusterDevices, options.devices, options.threads, options.watchdog_s));
  }
  if (absl::Status status = program.Validate(); !status.ok()) return status;
  Coordinator coordinator(program, options);
  return coordinator.Run();
}

namespace {

[[maybe_unused]] const bool registered = snurhac::RegisterRealClusterRunner(
    "uffd", [](const GridProgram& program, const snurhac::RealClusterRequest& request) {
      UffdClusterOptions options;
      static_cast<snurhac::RealClusterRequest&>(options) = request;
      return RunUffdCluster(program, options);
    });

}  // namespace

}  // namespace umlab
