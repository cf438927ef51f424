#include "emu/snurhac/coherence_directory.h"

#include "absl/strings/str_format.h"
#include "emu/snurhac/descriptor_owner.h"

namespace umlab::snurhac {

CoherenceDirectory::CoherenceDirectory(int device_count) : device_count_(device_count) {}

int CoherenceDirectory::DescriptorOwner(BlockNumber block) const {
  return snurhac::DescriptorOwner(block, device_count_);
}

absl::Status CoherenceDirectory::CheckDevice(int device) const {
  if (device < 0 || device >= device_count_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device %d is not one of the directory's %d devices", device, device_count_));
  }
  return absl::OkStatus();
}

BlockDescriptor& CoherenceDirectory::DescriptorOf(BlockNumber block) {
  // The thesis creates descriptors when the program allocates; creating one
  // at the first fault on its block is the same to every rule, since an
  // untouched block has empty masks and its data at the host.
  return descriptors_.try_emplace(block, device_count_).first->second;
}

const BlockDescriptor* CoherenceDirectory::Find(BlockNumber block) const {
  auto it = descriptors_.find(block);
  return it == descriptors_.end() ? nullptr : &it->second;
}

absl::StatusOr<LockReply> CoherenceDirectory::RequestLock(int device, BlockNumber block) {
  if (absl::Status status = CheckDevice(device); !status.ok()) return status;
  BlockDescriptor& descriptor = DescriptorOf(block);
  if (descriptor.lock_holder == device) {
    return absl::FailedPreconditionError(
        absl::StrFormat("device %d asked again for the lock of block %d, which it holds", device, block));
  }
  for (int waiting : descriptor.lock_waitlist) {
    if (waiting == device) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "device %d asked again for the lock of block %d, which it is waiting for", device, block));
    }
  }
  if (descriptor.lock_holder.has_value()) {
    descriptor.lock_waitlist.push_back(device);
    return LockReply::kQueued;
  }
  descriptor.lock_holder = device;
  ++locks_held_;
  return LockReply::kGranted;
}

absl::StatusOr<std::optional<int>> CoherenceDirectory::Unlock(int device, BlockNumber block) {
  if (absl::Status status = CheckDevice(device); !status.ok()) return status;
  auto it = descriptors_.find(block);
  if (it == descriptors_.end() || it->second.lock_holder != device) {
    return absl::FailedPreconditionError(
        absl::StrFormat("device %d released the lock of block %d, which it does not hold", device, block));
  }
  BlockDescriptor& descriptor = it->second;
  if (descriptor.lock_waitlist.empty()) {
    descriptor.lock_holder.reset();
    --locks_held_;
    return std::optional<int>();
  }
  descriptor.lock_holder = descriptor.lock_waitlist.front();
  descriptor.lock_waitlist.pop_front();
  return descriptor.lock_holder;
}

int CoherenceDirectory::NewestCopyHolder(const BlockDescriptor& descriptor, int page) {
  if (std::optional<int> writer = descriptor.WriterOf(page)) return *writer;
  if (descriptor.host_current.test(page)) return kHost;
  for (int device = 0; device < static_cast<int>(descriptor.read_masks.size()); ++device) {
    if (descriptor.read_masks[device].test(page)) return device;
  }
  return kHost;
}

int CoherenceDirectory::NewestCopyHolder(PageNumber page) const {
  const BlockDescriptor* descriptor = Find(BlockOfPage(page));
  return descriptor == nullptr ? kHost : NewestCopyHolder(*descriptor, PageIndexInBlock(page));
}

bool CoherenceDirectory::HasStaleReaders(const BlockDescriptor& descriptor) {
  PageMask written;
  for (const PageMask& mask : descriptor.write_masks) written |= mask;
  for (size_t device = 0; device < descriptor.read_masks.size(); ++device) {
    if ((descriptor.read_masks[device] & ~descriptor.write_masks[device] & written).any()) return true;
  }
  return false;
}

absl::StatusOr<FaultPlan> CoherenceDirectory::ResolveFaults(int device, BlockNumber block,
                                                            const FaultedPages& pages) {
  if (absl::Status status = CheckDevice(device); !status.ok()) return status;
  BlockDescriptor& descriptor = DescriptorOf(block);
  if (descriptor.lock_holder != device) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "device %d handed over faults on block %d without holding its lock (step 6 follows step 5)",
        device, block));
  }
  if (descriptor.read_only && pages.write.any()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "device %d write-faulted on block %d, which the kernel's launch marked read-only", device,
        block));
  }
  PageMask& own_read = descriptor.read_masks[device];
  PageMask& own_write = descriptor.write_masks[device];
  const PageMask new_write = pages.write & ~own_write;
  const PageMask new_read = pages.read & ~pages.write & ~own_read;

  std::vector<PageMask> fetch_from_device(device_count_);
  std::vector<PageMask> downgrade_at(device_count_);
  PageMask fetch_from_host;
  const PageMask faulted = new_read | new_write;
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if (!faulted.test(page)) continue;
    const std::optional<int> writer = descriptor.WriterOf(page);
    // An upgrade with no writer elsewhere: the device's own copy is newest.
    if (!writer.has_value() && own_read.test(page)) continue;
    const int from = NewestCopyHolder(descriptor, page);
    if (from == kHost) {
      fetch_from_host.set(page);
    } else {
      fetch_from_device[from].set(page);
    }
    // §6.3, write fault: "clears the Mth bit of all the other elements in
    // the write_masks" and "degrades the write protection ... to read
    // protection" at the previous writer.
    if (writer.has_value() && new_write.test(page)) downgrade_at[*writer].set(page);
  }

  FaultPlan plan;
  plan.device = device;
  plan.block = block;
  plan.descriptor_owner = DescriptorOwner(block);
  for (int other = 0; other < device_count_; ++other) {
    if (downgrade_at[other].any()) {
      descriptor.write_masks[other] &= ~downgrade_at[other];
      plan.downgrades.push_back(Downgrade{other, block, downgrade_at[other]});
    }
    if (fetch_from_device[other].any()) plan.fetches.push_back(Fetch{other, fetch_from_device[other]});
  }
  if (fetch_from_host.any()) plan.fetches.push_back(Fetch{kHost, fetch_from_host});
  // §6.3: a read fault sets the page in read_masks; a write fault in both.
  own_read |= new_read | new_write;
  own_write |= new_write;
  // The writer's copy is the newest from now on, not the host's.
  descriptor.host_current &= ~new_write;
  plan.map_read = new_read;
  plan.map_write = new_write;
  if (HasStaleReaders(descriptor)) blocks_to_sync_.insert(block);
  return plan;
}

absl::StatusOr<EvictionPlan> CoherenceDirectory::Evict(int device, BlockNumber block,
                                                      const PageMask& pages) {
  if (absl::Status status = CheckDevice(device); !status.ok()) return status;
  BlockDescriptor& descriptor = DescriptorOf(block);
  if (descriptor.lock_holder != device) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "device %d evicted pages of block %d without holding its lock", device, block));
  }
  EvictionPlan plan;
  plan.device = device;
  plan.block = block;
  plan.descriptor_owner = DescriptorOwner(block);
  PageMask& own_read = descriptor.read_masks[device];
  PageMask& own_write = descriptor.write_masks[device];
  plan.unmap = pages & own_read;
  const PageMask written = plan.unmap & own_write;
  PageMask others_map;
  for (int other = 0; other < device_count_; ++other) {
    if (other != device) others_map |= descriptor.read_masks[other];
  }
  // A reader's copy that is the last of data newer than the host's. (With
  // no writer, every copy holds the newest data; read masks include the
  // writers'.)
  PageMask writers;
  for (const PageMask& mask : descriptor.write_masks) writers |= mask;
  const PageMask last_copy = plan.unmap & ~writers & ~others_map & ~descriptor.host_current;
  plan.write_back = written | last_copy;
  for (int other = 0; other < device_count_; ++other) {
    if (other == device) continue;
    const PageMask stale = descriptor.read_masks[other] & written;
    if (stale.none()) continue;
    descriptor.read_masks[other] &= ~stale;
    plan.unmaps.push_back(Unmap{other, block, stale});
  }
  own_read &= ~plan.unmap;
  own_write &= ~plan.unmap;
  descriptor.host_current |= plan.write_back;
  return plan;
}

absl::StatusOr<std::vector<Downgrade>> CoherenceDirectory::SetReadOnly(BlockNumber block,
                                                                       bool read_only) {
  BlockDescriptor& descriptor = DescriptorOf(block);
  if (descriptor.lock_holder.has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "block %d's read-only flag changed while device %d services a fault on it; flags change "
        "at a kernel's launch",
        block, *descriptor.lock_holder));
  }
  descriptor.read_only = read_only;
  std::vector<Downgrade> downgrades;
  if (!read_only) return downgrades;
  for (int device = 0; device < device_count_; ++device) {
    PageMask& written = descriptor.write_masks[device];
    if (written.none()) continue;
    downgrades.push_back(Downgrade{device, block, written});
    written.reset();
  }
  return downgrades;
}

absl::StatusOr<std::vector<Unmap>> CoherenceDirectory::EndKernel() {
  if (locks_held_ > 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a kernel ended while %d block locks are held: every device's faults must be serviced "
        "before it finishes the kernel",
        locks_held_));
  }
  std::vector<Unmap> unmaps;
  for (BlockNumber block : blocks_to_sync_) {
    BlockDescriptor& descriptor = descriptors_.at(block);
    PageMask written;
    for (const PageMask& mask : descriptor.write_masks) written |= mask;
    for (int device = 0; device < device_count_; ++device) {
      // §6.3: "unmaps the page from the processors who have the page with
      // read protection. Also, it clears the bit of the page in the
      // read_masks".
      const PageMask stale = descriptor.read_masks[device] & ~descriptor.write_masks[device] & written;
      if (stale.none()) continue;
      descriptor.read_masks[device] &= ~stale;
      unmaps.push_back(Unmap{device, block, stale});
    }
  }
  blocks_to_sync_.clear();
  return unmaps;
}

}  // namespace umlab::snurhac
