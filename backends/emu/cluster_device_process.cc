#include "backends/emu/cluster_device_process.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/str_format.h"
#include "backends/emu/cluster_channel.h"
#include "backends/emu/cluster_device_memory.h"
#include "backends/emu/cluster_reference.h"
#include "emu/snurhac/cluster_sim.h"
#include "emu/snurhac/coherence_directory.h"
#include "emu/snurhac/descriptor_owner.h"
#include "emu/snurhac/launch_plan.h"

namespace umlab {
namespace {

using snurhac::ClusterDeviceStats;
using snurhac::kHost;
using Kind = ClusterMessageKind;

static_assert(std::is_trivially_copyable_v<ClusterDeviceStats>);


// A piece of a share's work: words [first, end) of one access, loaded or
// stored; never more than a page, so that the workers spread over pages.
struct WorkPiece {
  uint64_t first = 0;
  uint64_t end = 0;
  bool write = false;
};

class DeviceProcess {
 public:
  DeviceProcess(const GridProgram& program, const ClusterDeviceOptions& options,
                ClusterWiring::Ends ends)
      : program_(program), options_(options), directory_(options.devices), reference_(program) {
    for (int fd : ends.client_to) clients_.push_back(std::make_unique<ClusterChannel>(fd));
    for (int fd : ends.server_from) servers_.push_back(std::make_unique<ClusterChannel>(fd));
    control_ = std::make_unique<ClusterChannel>(ends.control.at(0));
  }

  int Run();

 private:
  // Process index of a device (or the host, kHost).
  static int ProcessOf(int device) { return device == kHost ? 0 : device + 1; }
  ClusterChannel& Client(int device) { return *clients_[ProcessOf(device)]; }
  [[noreturn]] void Fail(const absl::Status& status);

  // --- The fault handler ---
  void HandlerLoop();
  absl::Status ServiceBlock(BlockNumber block, const snurhac::FaultedPages& pages);
  // Steps 4 and 5: the lock, granted now or after waiting.
  absl::Status Lock(BlockNumber block);
  absl::Status Unlock(BlockNumber block);
  // Bytes of `pages` from `from` (a device or the host), a page each.
  absl::StatusOr<std::string> FetchPages(int from, BlockNumber block, const PageMask& pages);

  // --- The server ---
  absl::Status Serve(int process, ClusterMessage request);
  absl::Status Reply(int process, ClusterMessage reply) {
    reply.kind = Kind::kReply;
    return servers_[process]->Send(reply);
  }

  // Returns once the handler has serviced every fault queued before the
  // call and holds no block's lock (DeviceProcess::RunKernel says why).
  void AwaitQuietHandler();

  // --- Commands ---
  absl::StatusOr<ClusterMessage> RunKernel(int index);
  absl::Status CopyOut(bool every_array);
  void Count(const std::function<void(ClusterDeviceStats&)>& change) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    change(stats_);
  }

  const GridProgram& program_;
  const ClusterDeviceOptions options_;
  std::unique_ptr<ClusterDeviceMemory> memory_;
  std::vector<std::unique_ptr<ClusterChannel>> clients_;
  std::vector<std::unique_ptr<ClusterChannel>> servers_;
  std::unique_ptr<ClusterChannel> control_;
  // The descriptors this device owns (descriptor_owner.h); only the server
  // thread touches it.
  snurhac::CoherenceDirectory directory_;
  ClusterReference reference_;
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  // AwaitQuietHandler's requests, counted, and the handler's answers; the
  // eventfd wakes the handler from its wait for faults.
  int quiet_fd_ = -1;
  std::mutex quiet_mutex_;
  std::condition_variable quiet_;
  uint64_t quiet_requested_ = 0;  // under quiet_mutex_
  uint64_t quiet_answered_ = 0;   // under quiet_mutex_
  std::mutex stats_mutex_;
  ClusterDeviceStats stats_;
};

void DeviceProcess::Fail(const absl::Status& status) {
  ClusterMessage error;
  error.kind = Kind::kError;
  error.device = options_.device;
  error.payload = absl::StrFormat("device %d: %s", options_.device, status.message());
  (void)control_->Send(error);
  _exit(1);
}

// --- The fault handler -----------------------------------------------------------

void DeviceProcess::HandlerLoop() {
  while (!stopping_.load(std::memory_order_acquire)) {
    uint64_t requested = 0;
    {
      std::lock_guard<std::mutex> lock(quiet_mutex_);
      requested = quiet_requested_;
    }
    absl::StatusOr<std::vector<ClusterFault>> faults = memory_->ReadFaults(50, quiet_fd_);
    if (!faults.ok()) Fail(faults.status());
    if (faults->empty()) {
      // Nothing queued after the request was made, and no block in service:
      // quiet, as asked.
      std::lock_guard<std::mutex> lock(quiet_mutex_);
      if (requested != quiet_answered_) {
        uint64_t count = 0;
        if (read(quiet_fd_, &count, sizeof(count)) != sizeof(count)) {
          Fail(absl::InternalError("reading the handler's eventfd failed"));
        }
        quiet_answered_ = requested;
        quiet_.notify_all();
      }
      continue;
    }
    // Steps 1 and 2: the faults read at once are a batch, grouped by block;
    // a write subsumes a read of the same page.
    absl::btree_map<BlockNumber, snurhac::FaultedPages> blocks;
    for (const ClusterFault& fault : *faults) {
      if (fault.page >= memory_->pages()) {
        Fail(absl::OutOfRangeError(absl::StrFormat("a fault at page %d, outside the range",
                                                   fault.page)));
      }
      snurhac::FaultedPages& pages = blocks[BlockOfPage(fault.page)];
      const int index = PageIndexInBlock(fault.page);
      pages.read.set(index);
      if (fault.write) pages.write.set(index);
    }
    uint64_t distinct = 0;
    for (const auto& [block, pages] : blocks) distinct += pages.read.count();
    Count([&](ClusterDeviceStats& s) {
      s.faults += faults->size();
      ++s.fault_batches;
      s.faulted_pages += distinct;
    });
    for (const auto& [block, pages] : blocks) {
      if (absl::Status status = ServiceBlock(block, pages); !status.ok()) Fail(status);
    }
  }
}

void DeviceProcess::AwaitQuietHandler() {
  std::unique_lock<std::mutex> lock(quiet_mutex_);
  const uint64_t request = ++quiet_requested_;
  const uint64_t one = 1;
  if (write(quiet_fd_, &one, sizeof(one)) != sizeof(one)) {
    Fail(absl::InternalError("waking the fault handler failed"));
  }
  quiet_.wait(lock, [&] { return quiet_answered_ >= request; });
}

absl::Status DeviceProcess::Lock(BlockNumber block) {
  ClusterMessage request;
  request.kind = Kind::kLock;
  request.device = options_.device;
  request.block = block;
  absl::StatusOr<ClusterMessage> granted =
      Client(snurhac::DescriptorOwner(block, options_.devices)).Call(request);
  if (!granted.ok()) return granted.status();
  if (granted->value != 0) Count([](ClusterDeviceStats& s) { ++s.lock_waits; });
  return absl::OkStatus();
}

absl::Status DeviceProcess::Unlock(BlockNumber block) {
  ClusterMessage request;
  request.kind = Kind::kUnlock;
  request.device = options_.device;
  request.block = block;
  return Client(snurhac::DescriptorOwner(block, options_.devices)).Call(request).status();
}

absl::StatusOr<std::string> DeviceProcess::FetchPages(int from, BlockNumber block,
                                                      const PageMask& pages) {
  ClusterMessage request;
  request.kind = Kind::kFetch;
  request.device = options_.device;
  request.block = block;
  request.read = pages;
  absl::StatusOr<ClusterMessage> reply = Client(from).Call(request);
  if (!reply.ok()) return reply.status();
  // The host sends only the pages that hold data (`write` of the reply);
  // the others have never held any and are zero-filled here.
  const PageMask with_data = from == kHost ? reply->write : pages;
  if (reply->payload.size() != MaskBytes(with_data) || (with_data & ~pages).any()) {
    return absl::DataLossError(absl::StrFormat("a fetch of block %d from %d came back malformed",
                                               block, from));
  }
  std::string bytes(MaskBytes(pages), '\0');
  uint64_t in = 0, out = 0;
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if (!pages.test(page)) continue;
    if (with_data.test(page)) {
      std::memcpy(bytes.data() + out, reply->payload.data() + in, kPageSize);
      in += kPageSize;
    }
    out += kPageSize;
  }
  Count([&](ClusterDeviceStats& s) {
    (from == kHost ? s.host_fetch_bytes : s.peer_fetch_bytes) += MaskBytes(with_data);
    s.zero_filled_bytes += MaskBytes(pages & ~with_data);
  });
  return bytes;
}

absl::Status DeviceProcess::ServiceBlock(BlockNumber block, const snurhac::FaultedPages& pages) {
  const int owner = snurhac::DescriptorOwner(block, options_.devices);
  if (absl::Status status = Lock(block); !status.ok()) return status;
  // Steps 6 and 7: the fault list; the owner's directory answers the plan.
  ClusterMessage faults;
  faults.kind = Kind::kResolve;
  faults.device = options_.device;
  faults.block = block;
  faults.read = pages.read;
  faults.write = pages.write;
  absl::StatusOr<ClusterMessage> reply = Client(owner).Call(faults);
  if (!reply.ok()) return reply.status();
  absl::StatusOr<std::vector<ClusterAction>> actions = DecodeActions(reply->payload);
  if (!actions.ok()) return actions.status();
  const PageMask map_read = reply->read, map_write = reply->write;
  // Steps 8 to 10: every downgrade acknowledged before any copy.
  for (const ClusterAction& action : *actions) {
    if (action.tag != kActionDowngrade) continue;
    ClusterMessage downgrade;
    downgrade.kind = Kind::kDowngrade;
    downgrade.device = options_.device;
    downgrade.block = block;
    downgrade.read = action.pages;
    if (absl::Status status = Client(action.device).Call(downgrade).status(); !status.ok()) {
      return status;
    }
  }
  PageMask fetched;
  for (const ClusterAction& action : *actions) {
    if (action.tag != kActionFetch) continue;
    absl::StatusOr<std::string> bytes = FetchPages(action.device, block, action.pages);
    if (!bytes.ok()) return bytes.status();
    // Read-only where the plan maps for reading, read-write where writing.
    std::string read_bytes, write_bytes;
    uint64_t offset = 0;
    for (int page = 0; page < kPagesPerBlock; ++page) {
      if (!action.pages.test(page)) continue;
      (map_write.test(page) ? write_bytes : read_bytes).append(bytes->data() + offset, kPageSize);
      offset += kPageSize;
    }
    if (absl::Status status = memory_->Install(block, action.pages & ~map_write,
                                               read_bytes.data(), true);
        !status.ok()) {
      return status;
    }
    if (absl::Status status =
            memory_->Install(block, action.pages & map_write, write_bytes.data(), false);
        !status.ok()) {
      return status;
    }
    fetched |= action.pages;
  }
  if ((map_read & ~fetched).any()) {
    return absl::InternalError(absl::StrFormat(
        "the plan for block %d maps pages for reading that no fetch carries", block));
  }
  // Upgrades in place: the device's copy is the newest, only the protection
  // changes.
  const PageMask upgrades = map_write & ~fetched;
  if (upgrades.any()) {
    if (absl::Status status = memory_->AllowWrite(block, upgrades); !status.ok()) return status;
    Count([&](ClusterDeviceStats& s) { s.upgrades += upgrades.count(); });
  }
  // Step 11, then the replay: every thread stalled on the block's faulted
  // pages retries (those the plan left out were already mapped as asked).
  if (absl::Status status = Unlock(block); !status.ok()) return status;
  return memory_->Wake(block, pages.read | pages.write);
}

// --- The server --------------------------------------------------------------------

absl::Status DeviceProcess::Serve(int process, ClusterMessage request) {
  ClusterMessage reply;
  reply.device = options_.device;
  reply.block = request.block;
  const BlockNumber block = request.block;
  auto owned = [&]() -> absl::Status {
    if (snurhac::DescriptorOwner(block, options_.devices) == options_.device) {
      return absl::OkStatus();
    }
    return absl::InternalError(absl::StrFormat(
        "asked about block %d, whose descriptor device %d keeps", block,
        snurhac::DescriptorOwner(block, options_.devices)));
  };
  switch (request.kind) {
    case Kind::kLock: {
      if (absl::Status status = owned(); !status.ok()) return status;
      absl::StatusOr<snurhac::LockReply> lock = directory_.RequestLock(request.device, block);
      if (!lock.ok()) return lock.status();
      // Queued: the grant goes out when the holder unlocks.
      if (*lock == snurhac::LockReply::kQueued) return absl::OkStatus();
      return Reply(process, reply);
    }
    case Kind::kUnlock: {
      if (absl::Status status = owned(); !status.ok()) return status;
      absl::StatusOr<std::optional<int>> next = directory_.Unlock(request.device, block);
      if (!next.ok()) return next.status();
      if (next->has_value()) {
        ClusterMessage grant;
        grant.device = options_.device;
        grant.block = block;
        grant.value = 1;  // it waited
        if (absl::Status status = Reply(ProcessOf(**next), grant); !status.ok()) return status;
      }
      return Reply(process, reply);
    }
    case Kind::kResolve: {
      if (absl::Status status = owned(); !status.ok()) return status;
      absl::StatusOr<snurhac::FaultPlan> plan = directory_.ResolveFaults(
          request.device, block, snurhac::FaultedPages{request.read, request.write});
      if (!plan.ok()) return plan.status();
      std::vector<ClusterAction> actions;
      for (const snurhac::Downgrade& d : plan->downgrades) {
        actions.push_back(ClusterAction{kActionDowngrade, d.device, d.block, d.pages});
      }
      for (const snurhac::Fetch& f : plan->fetches) {
        actions.push_back(ClusterAction{kActionFetch, f.from, block, f.pages});
      }
      reply.read = plan->map_read;
      reply.write = plan->map_write;
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    case Kind::kEvict: {
      if (absl::Status status = owned(); !status.ok()) return status;
      absl::StatusOr<snurhac::EvictionPlan> plan =
          directory_.Evict(request.device, block, request.read);
      if (!plan.ok()) return plan.status();
      std::vector<ClusterAction> actions;
      for (const snurhac::Unmap& u : plan->unmaps) {
        actions.push_back(ClusterAction{kActionUnmap, u.device, u.block, u.pages});
      }
      reply.read = plan->unmap;
      reply.write = plan->write_back;
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    case Kind::kSetReadOnly: {
      if (absl::Status status = owned(); !status.ok()) return status;
      absl::StatusOr<std::vector<snurhac::Downgrade>> downgrades =
          directory_.SetReadOnly(block, request.value != 0);
      if (!downgrades.ok()) return downgrades.status();
      std::vector<ClusterAction> actions;
      for (const snurhac::Downgrade& d : *downgrades) {
        actions.push_back(ClusterAction{kActionDowngrade, d.device, d.block, d.pages});
      }
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    case Kind::kEndKernel: {
      absl::StatusOr<std::vector<snurhac::Unmap>> unmaps = directory_.EndKernel();
      if (!unmaps.ok()) return unmaps.status();
      std::vector<ClusterAction> actions;
      for (const snurhac::Unmap& u : *unmaps) {
        actions.push_back(ClusterAction{kActionUnmap, u.device, u.block, u.pages});
      }
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    case Kind::kDowngrade: {
      if (!options_.inject.skip_downgrade) {
        if (absl::Status status = memory_->ProtectWrite(block, request.read); !status.ok()) {
          return status;
        }
      }
      Count([&](ClusterDeviceStats& s) { s.downgrades += request.read.count(); });
      return Reply(process, reply);
    }
    case Kind::kFetch: {
      absl::StatusOr<std::string> bytes = memory_->Read(block, request.read);
      if (!bytes.ok()) return bytes.status();
      reply.write = request.read;
      reply.payload = *std::move(bytes);
      return Reply(process, reply);
    }
    case Kind::kUnmap: {
      // value != 0: a kernel end's unmap (which the injection may skip).
      if (!(request.value != 0 && options_.inject.skip_kernel_end_unmap)) {
        if (absl::Status status = memory_->Unmap(block, request.read); !status.ok()) return status;
      }
      if (request.value != 0) {
        Count([&](ClusterDeviceStats& s) { s.kernel_end_unmapped_pages += request.read.count(); });
      }
      return Reply(process, reply);
    }
    case Kind::kAuditMasks: {
      // Every descriptor this device owns, as masks per device.
      std::vector<ClusterAction> actions;
      for (BlockNumber b = 0; b * kPagesPerBlock < memory_->pages(); ++b) {
        const snurhac::BlockDescriptor* descriptor = directory_.Find(b);
        if (descriptor == nullptr) continue;
        for (int d = 0; d < options_.devices; ++d) {
          actions.push_back(ClusterAction{kActionMapped, d, b, descriptor->read_masks[d]});
          actions.push_back(ClusterAction{kActionWritable, d, b, descriptor->write_masks[d]});
        }
      }
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    case Kind::kAuditPages: {
      std::vector<ClusterAction> actions;
      for (BlockNumber b = 0; b * kPagesPerBlock < memory_->pages(); ++b) {
        absl::StatusOr<std::pair<PageMask, PageMask>> table = memory_->PageTable(b);
        if (!table.ok()) return table.status();
        if (table->first.none()) continue;
        actions.push_back(ClusterAction{kActionMapped, options_.device, b, table->first});
        actions.push_back(ClusterAction{kActionWritable, options_.device, b, table->second});
      }
      reply.payload = EncodeActions(actions);
      return Reply(process, reply);
    }
    default:
      return absl::InternalError(
          absl::StrFormat("a request of kind %d the device server does not take",
                          static_cast<int>(request.kind)));
  }
}

// --- Commands ------------------------------------------------------------------------

absl::StatusOr<ClusterMessage> DeviceProcess::RunKernel(int index) {
  const GridKernel& kernel = program_.launches[index];
  if (options_.crash_at_first_kernel) kill(getpid(), SIGKILL);
  reference_.BeginKernel(index);
  // Every process plans the launch the same way; this one runs its share.
  absl::StatusOr<snurhac::LaunchPlan> plan =
      snurhac::PlanLaunch(program_, kernel, options_.devices);
  if (!plan.ok()) return plan.status();
  const GridShare& share = plan->shares[options_.device];
  std::vector<WorkPiece> pieces;
  if (!share.empty()) {
    for (const GridAccess& access : kernel.accesses) {
      const bool write = access.access != AccessType::kRead;
      for (const ByteRange& range : TouchedBytes(program_, kernel, access, share)) {
        for (uint64_t word = FirstWord(range); word < EndWord(range);) {
          const uint64_t page_end = (word * kWordBytes / kPageSize + 1) * kPageSize / kWordBytes;
          const uint64_t end = std::min(EndWord(range), page_end);
          pieces.push_back(WorkPiece{word, end, write});
          word = end;
        }
      }
    }
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> mismatches{0};
  std::mutex first_mutex;
  std::string first_mismatch;
  // Relaxed atomics: plain loads and stores on x86, and what they are to a
  // race detector, since one device's threads may read words its other
  // threads write in the same kernel (gemm's C), as a GPU's blocks may.
  auto* words = reinterpret_cast<uint32_t*>(memory_->base());
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < pieces.size(); i = next.fetch_add(1)) {
      const WorkPiece& piece = pieces[i];
      for (uint64_t word = piece.first; word < piece.end; ++word) {
        if (piece.write) {
          __atomic_store_n(&words[word], WordValue(index, word), __ATOMIC_RELAXED);
          continue;
        }
        const uint32_t seen = __atomic_load_n(&words[word], __ATOMIC_RELAXED);
        if (reference_.ReadAllowed(word, seen)) continue;
        if (mismatches.fetch_add(1) == 0) {
          std::lock_guard<std::mutex> lock(first_mutex);
          first_mismatch = absl::StrFormat(
              "device %d, kernel %d (%s): word %d (page %d) read 0x%08x, expected 0x%08x%s",
              options_.device, index, kernel.name, word, word * kWordBytes / kPageSize, seen,
              reference_.Expected(word),
              reference_.WrittenByCurrent(word) ? " or this kernel's value" : "");
        }
      }
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < options_.threads; ++t) workers.emplace_back(work);
  for (std::thread& worker : workers) worker.join();
  // The kernel is done only when the handler is too. UFFDIO_COPY wakes a
  // stalled thread before the handler unlocks the block, and a page two
  // threads faulted on is queued twice, the second message read after the
  // first's service woke both: either way the handler may still be taking
  // or holding a block's lock when the last worker returns, and the owner's
  // kernel end would find it held. No worker runs now, so no fault comes
  // after those queued already.
  AwaitQuietHandler();
  reference_.EndKernel();
  ClusterMessage done;
  done.device = options_.device;
  done.value = static_cast<int32_t>(std::min<uint64_t>(mismatches.load(), INT32_MAX));
  done.payload = first_mismatch;
  return done;
}

absl::Status DeviceProcess::CopyOut(bool every_array) {
  // The copy-out gives pages up by the eviction rule (coherence_directory.h),
  // block by block under the block's lock, as the sim's does.
  for (BlockNumber block = 0; block * kPagesPerBlock < memory_->pages(); ++block) {
    PageMask pages;
    for (const GridArray& array : program_.arrays) {
      if (every_array || array.copied_out) pages |= PagesOfArray(array, block);
    }
    if ((memory_->Mapped(block) & pages).none()) continue;
    if (absl::Status status = Lock(block); !status.ok()) return status;
    ClusterMessage evict;
    evict.kind = Kind::kEvict;
    evict.device = options_.device;
    evict.block = block;
    evict.read = pages;
    absl::StatusOr<ClusterMessage> reply =
        Client(snurhac::DescriptorOwner(block, options_.devices)).Call(evict);
    if (!reply.ok()) return reply.status();
    const PageMask unmap = reply->read, write_back = reply->write;
    // Read the last copies, then unmap, then write them back: nothing runs
    // on this device between the kernels.
    absl::StatusOr<std::string> bytes = memory_->Read(block, write_back);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status status = memory_->Unmap(block, unmap); !status.ok()) return status;
    if (write_back.any()) {
      ClusterMessage store;
      store.kind = Kind::kWriteBack;
      store.device = options_.device;
      store.block = block;
      store.read = write_back;
      store.payload = *std::move(bytes);
      if (absl::Status status = Client(kHost).Call(store).status(); !status.ok()) return status;
      Count([&](ClusterDeviceStats& s) { s.write_back_bytes += MaskBytes(write_back); });
    }
    absl::StatusOr<std::vector<ClusterAction>> actions = DecodeActions(reply->payload);
    if (!actions.ok()) return actions.status();
    for (const ClusterAction& action : *actions) {
      ClusterMessage drop;
      drop.kind = Kind::kUnmap;
      drop.device = options_.device;
      drop.block = block;
      drop.read = action.pages;
      if (absl::Status status = Client(action.device).Call(drop).status(); !status.ok()) {
        return status;
      }
    }
    if (absl::Status status = Unlock(block); !status.ok()) return status;
  }
  return absl::OkStatus();
}

int DeviceProcess::Run() {
  uint64_t bytes = 0;
  for (const GridArray& array : program_.arrays) {
    bytes = std::max(bytes, array.address + array.bytes);
  }
  absl::StatusOr<std::unique_ptr<ClusterDeviceMemory>> memory = ClusterDeviceMemory::Create(bytes);
  if (!memory.ok()) Fail(memory.status());
  memory_ = *std::move(memory);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  quiet_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0 || quiet_fd_ < 0) Fail(absl::InternalError("eventfd failed"));
  std::vector<ClusterChannel*> servers;
  for (auto& channel : servers_) servers.push_back(channel.get());
  std::thread server([&] {
    absl::Status status = ServeChannels(servers, stop_fd_, [this](int process, ClusterMessage m) {
      return Serve(process, std::move(m));
    });
    if (!status.ok()) Fail(status);
  });
  std::thread handler([this] { HandlerLoop(); });
  {
    ClusterMessage ready;  // the range is registered: the run may start
    ready.device = options_.device;
    if (!control_->Send(ready).ok()) _exit(1);
  }
  while (true) {
    absl::StatusOr<ClusterMessage> command = control_->Receive();
    if (!command.ok()) _exit(1);  // the coordinator is gone
    ClusterMessage reply;
    reply.device = options_.device;
    if (command->kind == Kind::kRunKernel) {
      absl::StatusOr<ClusterMessage> done = RunKernel(command->value);
      if (!done.ok()) Fail(done.status());
      reply = *std::move(done);
    } else if (command->kind == Kind::kCopyOut) {
      if (absl::Status status = CopyOut(command->value != 0); !status.ok()) Fail(status);
    } else if (command->kind == Kind::kStats) {
      std::lock_guard<std::mutex> lock(stats_mutex_);
      reply.payload.assign(reinterpret_cast<const char*>(&stats_), sizeof(stats_));
    } else if (command->kind == Kind::kQuit) {
      break;
    } else {
      Fail(absl::InternalError("an unknown command from the coordinator"));
    }
    if (!control_->Send(reply).ok()) _exit(1);
  }
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) != sizeof(one)) _exit(1);
  handler.join();
  server.join();
  ClusterMessage bye;
  bye.device = options_.device;
  (void)control_->Send(bye);
  return 0;
}

}  // namespace

int RunClusterDevice(const GridProgram& program, const ClusterDeviceOptions& options,
                     ClusterWiring::Ends ends) {
  DeviceProcess process(program, options, std::move(ends));
  return process.Run();
}

}  // namespace umlab
