#include "backends/emu/cluster_device_memory.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/emu/system_error.h"
#include "backends/emu/uffd_device.h"

namespace umlab {
namespace {

// How this file's errors name the device (ErrnoStatus).
constexpr absl::string_view kDevice = "cluster device";

char* PageAddress(char* base, BlockNumber block, int page) {
  return base + (FirstPageOfBlock(block) + static_cast<uint64_t>(page)) * kPageSize;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterDeviceMemory>> ClusterDeviceMemory::Create(uint64_t bytes) {
  std::unique_ptr<ClusterDeviceMemory> memory(new ClusterDeviceMemory());
  absl::StatusOr<int> fd = UffdDevice::OpenDescriptor();
  if (!fd.ok()) return fd.status();
  memory->uffd_ = *fd;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = 0;
  if (ioctl(memory->uffd_, UFFDIO_API, &api) != 0) return ErrnoStatus(kDevice, "UFFDIO_API");
  memory->bytes_ = (bytes + kBlockSize - 1) / kBlockSize * kBlockSize;
  memory->pages_ = memory->bytes_ / kPageSize;
  void* base = mmap(nullptr, memory->bytes_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return ErrnoStatus(kDevice, "mmap of the unified range");
  memory->base_ = static_cast<char*>(base);
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uint64_t>(memory->base_);
  reg.range.len = memory->bytes_;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
  if (ioctl(memory->uffd_, UFFDIO_REGISTER, &reg) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the uffd cluster needs userfaultfd's MISSING and write-protect modes on anonymous "
        "memory (Linux >= 5.7): UFFDIO_REGISTER failed (%s); use `umlab snurhac` on the sim",
        std::strerror(errno)));
  }
  const uint64_t needed = (uint64_t{1} << _UFFDIO_COPY) | (uint64_t{1} << _UFFDIO_WRITEPROTECT) |
                          (uint64_t{1} << _UFFDIO_WAKE);
  if ((reg.ioctls & needed) != needed) {
    return absl::FailedPreconditionError(
        "the uffd cluster needs UFFDIO_COPY, UFFDIO_WRITEPROTECT and UFFDIO_WAKE on anonymous "
        "memory, which this kernel does not offer; use `umlab snurhac` on the sim");
  }
  memory->pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (memory->pagemap_fd_ < 0) return ErrnoStatus(kDevice, "opening /proc/self/pagemap");
  memory->mapping_.assign(memory->pages_, PageMapping::kUnmapped);
  return memory;
}

ClusterDeviceMemory::~ClusterDeviceMemory() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (uffd_ >= 0) close(uffd_);
  if (pagemap_fd_ >= 0) close(pagemap_fd_);
}

absl::StatusOr<std::pair<PageMask, PageMask>> ClusterDeviceMemory::PageTable(
    BlockNumber block) const {
  // pagemap(5): one 64-bit entry per page; bit 63 present, bit 57 the
  // userfaultfd write-protect bit.
  constexpr uint64_t kPresent = uint64_t{1} << 63, kUffdWriteProtected = uint64_t{1} << 57;
  uint64_t entries[kPagesPerBlock];
  const uint64_t first = reinterpret_cast<uint64_t>(base_) / kPageSize + FirstPageOfBlock(block);
  const ssize_t got = pread(pagemap_fd_, entries, sizeof(entries),
                            static_cast<off_t>(first * sizeof(uint64_t)));
  if (got != static_cast<ssize_t>(sizeof(entries))) return ErrnoStatus(kDevice, "reading pagemap");
  PageMask present, writable;
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if ((entries[page] & kPresent) == 0) continue;
    present.set(page);
    if ((entries[page] & kUffdWriteProtected) == 0) writable.set(page);
  }
  return std::make_pair(present, writable);
}

PageMapping ClusterDeviceMemory::Mapping(PageNumber page) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapping_[page];
}

PageMask ClusterDeviceMemory::Mapped(BlockNumber block) const {
  std::lock_guard<std::mutex> lock(mutex_);
  PageMask mask;
  const PageNumber first = FirstPageOfBlock(block);
  for (int page = 0; page < kPagesPerBlock && first + page < pages_; ++page) {
    if (mapping_[first + page] != PageMapping::kUnmapped) mask.set(page);
  }
  return mask;
}

absl::Status ClusterDeviceMemory::CheckMapped(BlockNumber block, const PageMask& pages,
                                              const char* what) const {
  const PageNumber first = FirstPageOfBlock(block);
  for (int page = 0; page < kPagesPerBlock; ++page) {
    if (!pages.test(page)) continue;
    if (first + page >= pages_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cluster device: %s page %d beyond the range", what, first + page));
    }
    if (mapping_[first + page] == PageMapping::kUnmapped) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cluster device: asked to %s page %d (block %d), which this device does not map", what,
          first + page, block));
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterDeviceMemory::Install(BlockNumber block, const PageMask& pages,
                                          const char* data, bool write_protect) {
  std::lock_guard<std::mutex> lock(mutex_);
  const PageNumber first = FirstPageOfBlock(block);
  absl::Status status;
  int index = 0;  // pages of `data` consumed
  ForEachPageRun(pages, [&](int start, int count) {
    if (!status.ok()) return;
    const char* source = data + static_cast<uint64_t>(index) * kPageSize;
    index += count;
    // A stale reader's copy is replaced: drop it first (UFFDIO_COPY does
    // not overwrite). A thread touching it meanwhile faults and waits.
    for (int page = start; page < start + count; ++page) {
      if (mapping_[first + page] != PageMapping::kUnmapped &&
          madvise(PageAddress(base_, block, page), kPageSize, MADV_DONTNEED) != 0) {
        status = ErrnoStatus(kDevice, "MADV_DONTNEED before a copy");
        return;
      }
    }
    uint64_t done = 0;
    const uint64_t length = static_cast<uint64_t>(count) * kPageSize;
    while (done < length) {
      uffdio_copy copy{};
      copy.dst = reinterpret_cast<uint64_t>(PageAddress(base_, block, start)) + done;
      copy.src = reinterpret_cast<uint64_t>(source) + done;
      copy.len = length - done;
      copy.mode = write_protect ? UFFDIO_COPY_MODE_WP : 0;
      if (ioctl(uffd_, UFFDIO_COPY, &copy) == 0) break;
      if (copy.copy > 0) done += static_cast<uint64_t>(copy.copy);
      if (errno == EAGAIN || errno == EINTR) continue;
      status = ErrnoStatus(kDevice, absl::StrFormat("UFFDIO_COPY of page %d", first + start));
      return;
    }
    for (int page = start; page < start + count; ++page) {
      mapping_[first + page] = write_protect ? PageMapping::kReadOnly : PageMapping::kReadWrite;
    }
  });
  return status;
}

absl::Status ClusterDeviceMemory::AllowWrite(BlockNumber block, const PageMask& pages) {
  return SetWriteProtection(block, pages, /*protect=*/false);
}

absl::Status ClusterDeviceMemory::ProtectWrite(BlockNumber block, const PageMask& pages) {
  return SetWriteProtection(block, pages, /*protect=*/true);
}

absl::Status ClusterDeviceMemory::SetWriteProtection(BlockNumber block, const PageMask& pages,
                                                     bool protect) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (absl::Status status = CheckMapped(block, pages, protect ? "downgrade" : "upgrade");
      !status.ok()) {
    return status;
  }
  const PageNumber first = FirstPageOfBlock(block);
  absl::Status status;
  ForEachPageRun(pages, [&](int start, int count) {
    if (!status.ok()) return;
    uffdio_writeprotect request{};
    request.range.start = reinterpret_cast<uint64_t>(PageAddress(base_, block, start));
    request.range.len = static_cast<uint64_t>(count) * kPageSize;
    // Lifting the protection (mode 0) also wakes the writers it stalled.
    request.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
    if (ioctl(uffd_, UFFDIO_WRITEPROTECT, &request) != 0) {
      status = ErrnoStatus(kDevice, protect ? "UFFDIO_WRITEPROTECT" : "UFFDIO_WRITEPROTECT (lift)");
      return;
    }
    for (int page = start; page < start + count; ++page) {
      mapping_[first + page] = protect ? PageMapping::kReadOnly : PageMapping::kReadWrite;
    }
  });
  return status;
}

absl::StatusOr<std::string> ClusterDeviceMemory::Read(BlockNumber block,
                                                      const PageMask& pages) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (absl::Status status = CheckMapped(block, pages, "serve"); !status.ok()) return status;
  // Word by word with relaxed atomic loads: a writer's threads may be
  // storing into a page it serves to a reader (a read fault does not
  // downgrade the writer), and each word must come whole, old or new.
  std::string out(MaskBytes(pages), '\0');
  auto* to = reinterpret_cast<uint32_t*>(out.data());
  ForEachPageRun(pages, [&](int start, int count) {
    const auto* from = reinterpret_cast<const uint32_t*>(PageAddress(base_, block, start));
    const uint64_t words = static_cast<uint64_t>(count) * kPageSize / sizeof(uint32_t);
    for (uint64_t i = 0; i < words; ++i) *to++ = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
  });
  return out;
}

absl::Status ClusterDeviceMemory::Unmap(BlockNumber block, const PageMask& pages) {
  std::lock_guard<std::mutex> lock(mutex_);
  const PageNumber first = FirstPageOfBlock(block);
  absl::Status status;
  ForEachPageRun(pages, [&](int start, int count) {
    if (!status.ok()) return;
    if (madvise(PageAddress(base_, block, start), static_cast<uint64_t>(count) * kPageSize,
                MADV_DONTNEED) != 0) {
      status = ErrnoStatus(kDevice, "MADV_DONTNEED");
      return;
    }
    for (int page = start; page < start + count; ++page) {
      mapping_[first + page] = PageMapping::kUnmapped;
    }
  });
  return status;
}

absl::Status ClusterDeviceMemory::Wake(BlockNumber block, const PageMask& pages) {
  absl::Status status;
  ForEachPageRun(pages, [&](int start, int count) {
    if (!status.ok()) return;
    uffdio_range range{};
    range.start = reinterpret_cast<uint64_t>(PageAddress(base_, block, start));
    range.len = static_cast<uint64_t>(count) * kPageSize;
    if (ioctl(uffd_, UFFDIO_WAKE, &range) != 0) status = ErrnoStatus(kDevice, "UFFDIO_WAKE");
  });
  return status;
}

absl::StatusOr<std::vector<ClusterFault>> ClusterDeviceMemory::ReadFaults(int timeout_ms,
                                                                         int wake_fd) {
  std::vector<ClusterFault> faults;
  pollfd fds[2] = {{uffd_, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  const int ready = poll(fds, wake_fd >= 0 ? 2 : 1, timeout_ms);
  if (ready < 0 && errno != EINTR) return ErrnoStatus(kDevice, "poll on the userfaultfd");
  if (ready <= 0 || fds[0].revents == 0) return faults;
  uffd_msg messages[64];
  while (true) {
    const ssize_t got = read(uffd_, messages, sizeof(messages));
    if (got < 0) {
      if (errno == EAGAIN) break;
      if (errno == EINTR) continue;
      return ErrnoStatus(kDevice, "read of the userfaultfd");
    }
    const size_t count = static_cast<size_t>(got) / sizeof(uffd_msg);
    for (size_t i = 0; i < count; ++i) {
      if (messages[i].event != UFFD_EVENT_PAGEFAULT) continue;
      const uint64_t address = messages[i].arg.pagefault.address;
      const uint64_t flags = messages[i].arg.pagefault.flags;
      faults.push_back(ClusterFault{(address - reinterpret_cast<uint64_t>(base_)) / kPageSize,
                                    (flags & (UFFD_PAGEFAULT_FLAG_WRITE |
                                              UFFD_PAGEFAULT_FLAG_WP)) != 0});
    }
    if (count < 64) break;
  }
  return faults;
}

}  // namespace umlab
