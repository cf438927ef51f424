#include "backends/emu/uffd_device.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "backends/emu/streaming_copy.h"
#include "backends/emu/system_error.h"

// Linux 6.5 added write-protected UFFDIO_CONTINUE; older headers lack it.
#ifndef UFFDIO_CONTINUE_MODE_WP
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)  // log2(2 MiB) << MFD_HUGE_SHIFT
#endif

namespace umlab {
namespace {

// How this file's errors name the device (ErrnoStatus).
constexpr absl::string_view kDevice = "uffd device";

absl::Mutex opener_mu(absl::kConstInit);
UffdDevice::Opener& TestOpener() {
  static UffdDevice::Opener* opener = new UffdDevice::Opener;
  return *opener;
}

constexpr int kReadMessages = 64;  // per read()

int RealOpen(bool device_node) {
  if (!device_node) {
    // User-mode faults only: all the SM threads raise, and what
    // vm.unprivileged_userfaultfd=0 still allows a non-root user.
    const int fd = static_cast<int>(
        syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    return fd >= 0 ? fd : -errno;
  }
  const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
  if (dev < 0) return -errno;
  const int fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
  const int error = errno;
  close(dev);
  return fd >= 0 ? fd : -error;
}

// The syscall first, then /dev/userfaultfd; a one-line error naming both
// failures and the way out.
absl::StatusOr<int> OpenUserfaultfd(const UffdDevice::Opener& opener) {
  const int by_syscall = opener(false);
  if (by_syscall >= 0) return by_syscall;
  const int by_node = opener(true);
  if (by_node >= 0) return by_node;
  std::string sysctl = "?";
  if (FILE* f = std::fopen("/proc/sys/vm/unprivileged_userfaultfd", "r")) {
    char buffer[8] = {};
    if (std::fgets(buffer, sizeof buffer, f) != nullptr && buffer[0] != '\0') {
      sysctl = std::string(1, buffer[0]);
    }
    std::fclose(f);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "userfaultfd is unavailable to this process (userfaultfd(2): %s; /dev/userfaultfd: %s; "
      "vm.unprivileged_userfaultfd=%s, uid %d): run as root, allow the syscall (seccomp), "
      "or grant access to /dev/userfaultfd; or use --backend=sim, which needs none of this",
      ErrnoText(-by_syscall), ErrnoText(-by_node), sysctl, getuid()));
}

// Device memory as an unnamed file in a tmpfs directory, gone with its last
// descriptor as a memfd is. tmpfs only: minor faults need shared memory.
absl::StatusOr<int> OpenDeviceFile(const std::string& directory) {
  const std::string mount_hint = absl::StrFormat(
      "as root, mount -t tmpfs -o huge=within_size,size=<capacity plus room> none %s, or drop "
      "device_dir",
      directory);
  struct statfs fs {};
  if (statfs(directory.c_str(), &fs) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "uffd device: device_dir=%s: %s; %s", directory, ErrnoText(errno), mount_hint));
  }
  if (fs.f_type != TMPFS_MAGIC) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "uffd device: device_dir=%s is not a tmpfs mount (userfaultfd minor faults need shared "
        "memory); %s",
        directory, mount_hint));
  }
  const int fd = open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "uffd device: cannot create device memory in device_dir=%s: %s", directory,
        ErrnoText(errno)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<int> UffdDevice::OpenDescriptor() {
  absl::MutexLock lock(&opener_mu);
  return OpenUserfaultfd(TestOpener() ? TestOpener() : UffdDevice::Opener(RealOpen));
}

void UffdDevice::SetOpenerForTesting(Opener opener) {
  absl::MutexLock lock(&opener_mu);
  TestOpener() = std::move(opener);
}

absl::StatusOr<std::unique_ptr<UffdDevice>> UffdDevice::Create(const Options& options) {
  std::unique_ptr<UffdDevice> device(new UffdDevice(options));
  if (absl::Status s = device->Init(); !s.ok()) return s;
  return device;
}

absl::Status UffdDevice::Init() {
  {
    absl::StatusOr<int> fd = OpenDescriptor();
    if (!fd.ok()) return fd.status();
    uffd_ = *fd;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_WP_HUGETLBFS_SHMEM | UFFD_FEATURE_THREAD_ID |
                 (options_.huge_pages
                      ? UFFD_FEATURE_MISSING_HUGETLBFS | UFFD_FEATURE_MINOR_HUGETLBFS
                      : UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM);
  if (ioctl(uffd_, UFFDIO_API, &api) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "userfaultfd here lacks minor faults or write protection on shared memory "
        "(needs Linux >= 6.5): %s; use --backend=sim",
        ErrnoText(errno)));
  }
  const uint64_t bytes = range_bytes();
  if (options_.directory.empty()) {
    device_fd_ = memfd_create(options_.name.c_str(),
                              MFD_CLOEXEC | (options_.huge_pages ? MFD_HUGETLB | MFD_HUGE_2MB : 0));
  } else if (options_.huge_pages) {
    return absl::InvalidArgumentError(
        "uffd device: huge_pages and device_dir exclude each other (hugetlb frames are a memfd "
        "of their own)");
  } else {
    absl::StatusOr<int> fd = OpenDeviceFile(options_.directory);
    if (!fd.ok()) return fd.status();
    device_fd_ = *fd;
  }
  host_fd_ = memfd_create((options_.name + "-host").c_str(), MFD_CLOEXEC);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (device_fd_ < 0 || host_fd_ < 0 || stop_fd_ < 0) return ErrnoStatus(kDevice, "memfd/eventfd");
  if (ftruncate(device_fd_, static_cast<off_t>(bytes)) != 0 ||
      ftruncate(host_fd_, static_cast<off_t>(bytes)) != 0) {
    return ErrnoStatus(kDevice, "sizing the device range");
  }
  auto map = [&](int fd) -> char* {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  };
  device_ = map(device_fd_);
  host_ = map(host_fd_);
  // Read-only anonymous memory reads as the shared zero page: a source of
  // zeroes for zero-filled pages that costs no memory.
  void* zeroes = mmap(nullptr, kBlockSize, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  zeroes_ = zeroes == MAP_FAILED ? nullptr : static_cast<char*>(zeroes);
  staging_ = map(device_fd_);
  if (device_ == nullptr || host_ == nullptr || zeroes_ == nullptr || staging_ == nullptr) {
    return ErrnoStatus(kDevice, "mapping the device range");
  }
  if (!options_.storage_directory.empty()) {
    absl::StatusOr<std::unique_ptr<StorageFile>> storage =
        StorageFile::Create(options_.storage_directory);
    if (!storage.ok()) return storage.status();
    storage_ = std::move(*storage);
  }
  if (absl::Status s = Register(device_, bytes); !s.ok()) return s;
  // The host copies: write protection only (a hidden copy's source, which
  // a host write must not change until the copy has landed). Stores to
  // pages not protected go on as ever, and nothing faults on a missing page.
  uffdio_register host{};
  host.range.start = reinterpret_cast<uint64_t>(host_);
  host.range.len = bytes;
  host.mode = UFFDIO_REGISTER_MODE_WP;
  if (ioctl(uffd_, UFFDIO_REGISTER, &host) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "userfaultfd here cannot write-protect shared memory (UFFDIO_REGISTER_MODE_WP on a "
        "memfd: %s), which protects a copy's source; needs Linux >= 5.19; use --backend=sim",
        ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::Status UffdDevice::WriteHostCopy(uint64_t offset, const void* data, uint64_t length) {
  const char* bytes = static_cast<const char*>(data);
  while (length > 0) {
    const ssize_t written = pwrite(host_fd_, bytes, length, static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return ErrnoStatus(kDevice, "pwrite into the host copies");
    bytes += written;
    offset += static_cast<uint64_t>(written);
    length -= static_cast<uint64_t>(written);
  }
  return absl::OkStatus();
}

absl::Status UffdDevice::ReadHostCopy(uint64_t offset, void* out, uint64_t length) const {
  char* bytes = static_cast<char*>(out);
  while (length > 0) {
    const ssize_t got = pread(host_fd_, bytes, length, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return ErrnoStatus(kDevice, "pread from the host copies");
    bytes += got;
    offset += static_cast<uint64_t>(got);
    length -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::Status UffdDevice::ProtectHost(uint64_t offset, uint64_t length, bool protect) {
  if (uffd_ < 0) return absl::OkStatus();
  uffdio_writeprotect request{};
  request.range.start = reinterpret_cast<uint64_t>(host_) + offset;
  request.range.len = length;
  request.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0;  // lifting it wakes the writers
  if (ioctl(uffd_, UFFDIO_WRITEPROTECT, &request) != 0) {
    return ErrnoStatus(kDevice, absl::StrFormat("UFFDIO_WRITEPROTECT of host copies %#x+%#x",
                                                offset, length));
  }
  return absl::OkStatus();
}

absl::Status UffdDevice::Register(char* start, uint64_t length) {
  uffdio_register reg{};
  reg.range.start = reinterpret_cast<uint64_t>(start);
  reg.range.len = length;
  // MISSING as well as MINOR: a page of a frame that holds no memory (never
  // migrated, or released) has no page in the page cache, and a touch must
  // fault rather than let the kernel fill it with zeroes.
  reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR | UFFDIO_REGISTER_MODE_WP;
  if (ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) {
    return ErrnoStatus(kDevice, "registering the device range");
  }
  return absl::OkStatus();
}

UffdDevice::~UffdDevice() {
  StopReader();
  Release();
  const uint64_t bytes = range_bytes();
  for (char* p : {device_, host_, staging_}) {
    if (p != nullptr) munmap(p, bytes);
  }
  if (zeroes_ != nullptr) munmap(zeroes_, kBlockSize);
  for (int fd : {device_fd_, host_fd_, stop_fd_}) {
    if (fd >= 0) close(fd);
  }
}

absl::Status UffdDevice::AddSlots(uint64_t count) {
  if (slots_ + count > options_.max_blocks) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "uffd device: the program touches more than %d distinct 2 MiB blocks (%d GiB); "
        "raise the backend's max_gib",
        options_.max_blocks, options_.max_blocks * kBlockSize >> 30));
  }
  const uint64_t offset = slots_ * kBlockSize;
  const uint64_t length = count * kBlockSize;
  // The host copies only: each is a page's home for the whole run. Device
  // memory is allocated when bytes are copied in, and released per frame.
  if (madvise(host_ + offset, length, MADV_POPULATE_WRITE) != 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "uffd device: cannot allocate %d MiB of host memory: %s", length >> 20,
        ErrnoText(errno)));
  }
  slots_ += count;
  return absl::OkStatus();
}

namespace {

// pwrite/pread of a whole run, across short transfers. Pages with no device
// memory yet are written through the file, not a mapping: a write allocates
// the page-cache pages it fills without zeroing them first and installs no
// page-table entries, where a store through a mapping would take a page
// fault per fresh page and zero it. Reads go through the file too: a read
// of a hole through a shared mapping would allocate it.
absl::Status TransferAll(bool write, int fd, char* buffer, uint64_t length, uint64_t offset) {
  while (length > 0) {
    const ssize_t done =
        write ? pwrite(fd, buffer, length, static_cast<off_t>(offset))
              : pread(fd, buffer, length, static_cast<off_t>(offset));
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "uffd device: %s of %d bytes of device memory: %s (out of memory?)",
          write ? "writing" : "reading", length, ErrnoText(done < 0 ? errno : EIO)));
    }
    buffer += done;
    offset += static_cast<uint64_t>(done);
    length -= static_cast<uint64_t>(done);
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t UffdDevice::FreeHugePages() {
  uint64_t free = 0;
  if (FILE* f = std::fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r")) {
    unsigned long long value = 0;
    if (std::fscanf(f, "%llu", &value) == 1) free = value;
    std::fclose(f);
  }
  return free;
}

PageMask UffdDevice::PagesWithMemory(uint64_t slot) const {
  // mincore on the alias. On shared memory it reports the file's page
  // cache, mapped there or not; on hugetlb, whether the alias maps the
  // frame, which it does from the frame's first copy until its release.
  // Either way it only steers the copy's speed, and a failure reads as
  // "none", which is right for any page.
  unsigned char resident[kPagesPerBlock];
  PageMask pages;
  if (mincore(staging_ + slot * kBlockSize, kBlockSize, resident) != 0) return pages;
  for (int p = 0; p < kPagesPerBlock; ++p) pages[p] = (resident[p] & 1) != 0;
  return pages;
}

absl::Status UffdDevice::CopyIn(uint64_t slot, const PageMask& copy, const PageMask& zero) {
  const uint64_t base = slot * kBlockSize;
  auto host = [&](int page) { return host_ + base + page * kPageSize; };
  auto staged = [&](int page) { return staging_ + base + page * kPageSize; };
  const PageMask with_memory = PagesWithMemory(slot);
  // Pages that held memory before this copy take streaming stores through
  // the alias: the fastest copy into memory that is not in the cache, with
  // no allocation (and, after the first time, no fault).
  ForEachPageRun(copy & with_memory, [&](int first, int count) {
    StreamingCopy(staged(first), host(first), count * kPageSize);
  });
  ForEachPageRun(zero & with_memory, [&](int first, int count) {
    StreamingZero(staged(first), count * kPageSize);
  });
  const PageMask fresh_copy = copy & ~with_memory;
  const PageMask fresh_zero = zero & ~with_memory;
  if (fresh_copy.none() && fresh_zero.none()) return absl::OkStatus();
  if (options_.huge_pages) {
    // Takes the frame's huge page from the pool if it has none (a no-op
    // otherwise): ENOSPC here is an error, where a store would be SIGBUS.
    if (fallocate(device_fd_, 0, static_cast<off_t>(base), static_cast<off_t>(kBlockSize)) != 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "uffd device: no free 2 MiB huge page for a frame (%s; %d free): reserve more "
          "with vm.nr_hugepages, or run with huge_pages=off",
          ErrnoText(errno), FreeHugePages()));
    }
    // The kernel has just zeroed the new page, so it is in the cache, where
    // plain stores beat streaming ones (measured: 0.71-0.87 of memcpy
    // against 0.57-0.59).
    ForEachPageRun(fresh_copy, [&](int first, int count) {
      std::memcpy(staged(first), host(first), count * kPageSize);
    });
    ForEachPageRun(fresh_zero, [&](int first, int count) {
      std::memset(staged(first), 0, count * kPageSize);
    });
    return absl::OkStatus();
  }
  // Pages with no memory take write(2), which allocates them without
  // zeroing them; a store through the alias would fault, allocate and zero
  // each page (slower, and MADV_POPULATE_WRITE first no better:
  // docs/uffd.md).
  absl::Status status;
  ForEachPageRun(fresh_copy, [&](int first, int count) {
    if (status.ok()) {
      status = TransferAll(true, device_fd_, host(first), count * kPageSize,
                           base + first * kPageSize);
    }
  });
  ForEachPageRun(fresh_zero, [&](int first, int count) {
    if (status.ok()) {
      status = TransferAll(true, device_fd_, zeroes_, count * kPageSize, base + first * kPageSize);
    }
  });
  return status;
}

absl::Status UffdDevice::CopyOut(uint64_t slot, const PageMask& pages) {
  const uint64_t base = slot * kBlockSize;
  // As CopyIn: pages that hold memory are read through the alias (read
  // faults there map 16 pages at a time, and only once), the others
  // through the file, which reads a hole as zeroes without allocating it.
  const PageMask with_memory = PagesWithMemory(slot);
  ForEachPageRun(pages & with_memory, [&](int first, int count) {
    StreamingCopy(host_ + base + first * kPageSize, staging_ + base + first * kPageSize,
                  count * kPageSize);
  });
  absl::Status status;
  ForEachPageRun(pages & ~with_memory, [&](int first, int count) {
    if (status.ok()) {
      status = TransferAll(false, device_fd_, host_ + base + first * kPageSize,
                           count * kPageSize, base + first * kPageSize);
    }
  });
  return status;
}

void UffdDevice::ZeroHostCopy(uint64_t slot, const PageMask& pages) {
  ForEachPageRun(pages, [&](int first, int count) {
    std::memset(HostPage(slot, first), 0, count * kPageSize);
  });
}

absl::Status UffdDevice::ForEachStorageRun(
    uint64_t slot, const PageMask& pages,
    absl::FunctionRef<absl::Status(uint64_t offset, uint64_t length)> step) {
  if (storage_ == nullptr) return absl::FailedPreconditionError("uffd device: no storage tier");
  absl::Status status;
  ForEachPageRun(pages, [&](int first, int count) {
    if (status.ok()) status = step(slot * kBlockSize + first * kPageSize, count * kPageSize);
  });
  return status;
}

absl::Status UffdDevice::StoreHostCopy(uint64_t slot, const PageMask& pages) {
  return ForEachStorageRun(slot, pages, [&](uint64_t at, uint64_t length) {
    absl::Status status = storage_->Write(at, host_ + at, length);
    // The file holds the only copy now; the host's pages go back to the
    // system (they read as zeroes until LoadHostCopy fills them).
    if (status.ok() && fallocate(host_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                 static_cast<off_t>(at), static_cast<off_t>(length)) != 0) {
      status = ErrnoStatus(kDevice, "freeing host pages written to storage (fallocate PUNCH_HOLE)");
    }
    return status;
  });
}

absl::Status UffdDevice::LoadHostCopy(uint64_t slot, const PageMask& pages) {
  return ForEachStorageRun(slot, pages, [&](uint64_t at, uint64_t length) {
    return storage_->Read(at, host_ + at, length);
  });
}

absl::Status UffdDevice::ReleaseFrame(uint64_t slot) {
  if (fallocate(device_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                static_cast<off_t>(slot * kBlockSize), static_cast<off_t>(kBlockSize)) != 0) {
    return ErrnoStatus(kDevice, "releasing a frame (fallocate PUNCH_HOLE)");
  }
  return absl::OkStatus();
}

uint64_t UffdDevice::DeviceBytesAllocated() const {
  struct stat st {};
  if (fstat(device_fd_, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

absl::Status UffdDevice::RequireWholeBlock(const PageMask& pages, const char* what) const {
  if (!options_.huge_pages || pages == FullPageMask()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "uffd device: huge frames %s whole 2 MiB blocks only (%d of %d pages asked)", what,
      pages.count(), kPagesPerBlock));
}

absl::Status UffdDevice::Map(uint64_t slot, const PageMask& pages, bool write_protect) {
  if (uffd_ < 0) return absl::OkStatus();  // released: nothing faults any more
  if (absl::Status s = RequireWholeBlock(pages, "map"); !s.ok()) return s;
  absl::Status status;
  ForEachPageRun(pages, [&](int first, int count) {
    uint64_t start = reinterpret_cast<uint64_t>(DevicePage(slot, first));
    uint64_t left = count * kPageSize;
    while (left > 0 && status.ok()) {
      uffdio_continue request{};
      request.range.start = start;
      request.range.len = left;
      request.mode = UFFDIO_CONTINUE_MODE_DONTWAKE |
                     (write_protect ? UFFDIO_CONTINUE_MODE_WP : 0);
      if (ioctl(uffd_, UFFDIO_CONTINUE, &request) == 0) break;
      if (errno == EAGAIN && request.mapped > 0) {  // partly done; go on
        start += request.mapped;
        left -= request.mapped;
        continue;
      }
      if (errno == EAGAIN) continue;
      status = ErrnoStatus(
          kDevice, absl::StrFormat("UFFDIO_CONTINUE of slot %d pages %d+%d", slot, first, count));
    }
  });
  return status;
}

absl::StatusOr<bool> UffdDevice::RestoreMapping(uint64_t slot, int page, bool write_protect) {
  if (uffd_ < 0) return false;
  const uint64_t length = options_.huge_pages ? kBlockSize : kPageSize;
  const uint64_t start =
      reinterpret_cast<uint64_t>(options_.huge_pages ? DevicePage(slot, 0) : DevicePage(slot, page));
  for (;;) {
    uffdio_continue request{};
    request.range.start = start;
    request.range.len = length;
    request.mode = UFFDIO_CONTINUE_MODE_DONTWAKE | (write_protect ? UFFDIO_CONTINUE_MODE_WP : 0);
    if (ioctl(uffd_, UFFDIO_CONTINUE, &request) == 0) return true;
    if (errno == EEXIST) return false;  // the entry is there
    if (errno != EAGAIN) {
      return ErrnoStatus(kDevice, absl::StrFormat(
          "restoring the mapping of slot %d page %d (UFFDIO_CONTINUE; a mapped page with no "
          "device memory behind it)",
          slot, page));
    }
  }
}

absl::Status UffdDevice::Unmap(uint64_t slot, const PageMask& pages) {
  if (absl::Status s = RequireWholeBlock(pages, "unmap"); !s.ok()) return s;
  absl::Status status;
  ForEachPageRun(pages, [&](int first, int count) {
    if (madvise(DevicePage(slot, first), count * kPageSize, MADV_DONTNEED) != 0 &&
        status.ok()) {
      status = ErrnoStatus(kDevice, "MADV_DONTNEED");
    }
  });
  return status;
}

namespace {

// mmap failing here is mostly the process's mapping count: every run of
// remotely mapped pages is a mapping of its own (vm.max_map_count).
absl::Status RemapError(absl::string_view what, uint64_t slot, int first, int count) {
  const int error = errno;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "uffd device: %s of slot %d pages %d+%d: %s%s", what, slot, first, count,
      ErrnoText(error),
      error == ENOMEM ? " (each run of remotely mapped pages is a mapping of its own: raise "
                        "vm.max_map_count)"
                      : ""));
}

// mmap(MAP_FIXED | MAP_SHARED) of `fd` at `offset` over [at, at + length),
// through the system call itself rather than libc's mmap, which the
// sanitizers intercept: ThreadSanitizer takes a new mapping for a write, by
// the calling thread, of every byte in it, and these replace part of the
// device range under the SMs, whose next touches of it are ordered after the
// change by the kernel (a fault's wake) or by the backend's handshake, both
// invisible to it. Every SM access then read as a race with the remap.
bool MapFixed(char* at, uint64_t length, int prot, int fd, uint64_t offset) {
  return syscall(SYS_mmap, at, length, prot, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, fd,
                 offset) != -1;
}

}  // namespace

absl::Status UffdDevice::MapHostCopy(uint64_t slot, const PageMask& pages, const PageMask& zero) {
  if (options_.huge_pages) {
    return absl::InvalidArgumentError(
        "uffd device: huge frames cannot map host pages in place (a hugetlb mapping splits at "
        "2 MiB only)");
  }
  const uint64_t base = slot * kBlockSize;
  ZeroHostCopy(slot, zero & pages);
  absl::Status status;
  ForEachPageRun(pages, [&](int first, int count) {
    if (!status.ok()) return;
    const uint64_t offset = base + first * kPageSize;
    // The same offset in the host memfd as in device memory: adjacent runs
    // of one block (mapped a fault at a time) merge into one mapping.
    if (!MapFixed(DevicePage(slot, first), count * kPageSize, PROT_READ | PROT_WRITE, host_fd_,
                  offset)) {
      status = RemapError("mapping the host copy", slot, first, count);
      // A failed MAP_FIXED may have unmapped the range: put device memory
      // back, so that a touch faults instead of killing the process.
      (void)UnmapHostCopy(slot, PageRangeMask(first, count));
    }
  });
  return status;
}

absl::Status UffdDevice::UnmapHostCopy(uint64_t slot, const PageMask& pages) {
  absl::Status status;
  ForEachPageRun(pages, [&](int first, int count) {
    if (!status.ok()) return;
    char* start = DevicePage(slot, first);
    const uint64_t length = count * kPageSize;
    // The new mapping is a new VMA, outside the range's registration until
    // UFFDIO_REGISTER: a touch in between would be an ordinary shared-memory
    // fault, mapping whatever the page cache holds (or a fresh zero page)
    // with no fault message and no engine. The backend keeps every accessor
    // away meanwhile; PROT_NONE until then turns a slip into a crash, never
    // into wrong data.
    if (!MapFixed(start, length, PROT_NONE, device_fd_, slot * kBlockSize + first * kPageSize)) {
      status = RemapError("mapping device memory back", slot, first, count);
      return;
    }
    // Released (teardown): the range is ordinary memory already.
    if (uffd_ >= 0) status = Register(start, length);
    // Same protection as its neighbours: the kernel merges it back into the
    // range's one mapping. Also when the registration failed: the run
    // fails with its error then, rather than SMs with SIGSEGV.
    if (mprotect(start, length, PROT_READ | PROT_WRITE) != 0 && status.ok()) {
      status = RemapError("mprotect", slot, first, count);
    }
  });
  return status;
}

absl::Status UffdDevice::Wake(uint64_t offset, uint64_t length) {
  if (uffd_ < 0) return absl::OkStatus();
  uffdio_range range{reinterpret_cast<uint64_t>(device_) + offset, length};
  if (ioctl(uffd_, UFFDIO_WAKE, &range) != 0) return ErrnoStatus(kDevice, "UFFDIO_WAKE");
  return absl::OkStatus();
}

absl::Status UffdDevice::AllowWrite(uint64_t offset) {
  if (uffd_ < 0) return absl::OkStatus();
  uffdio_writeprotect request{};
  // A huge frame is one PMD: its protection is all or nothing.
  const uint64_t unit = options_.huge_pages ? kBlockSize : kPageSize;
  request.range.start = reinterpret_cast<uint64_t>(device_) + (offset & ~(unit - 1));
  request.range.len = unit;
  request.mode = 0;  // lift protection and wake
  if (ioctl(uffd_, UFFDIO_WRITEPROTECT, &request) != 0) {
    return ErrnoStatus(kDevice, "UFFDIO_WRITEPROTECT");
  }
  return absl::OkStatus();
}

absl::Status UffdDevice::StartReader(std::function<void(const UffdFault&)> handler) {
  if (reader_.joinable()) return absl::FailedPreconditionError("uffd reader already runs");
  handler_ = std::move(handler);
  // The reader inherits this mask: signals go to the threads that handle them.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  reader_ = std::thread([this] { ReaderLoop(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return absl::OkStatus();
}

void UffdDevice::StopReader() {
  if (!reader_.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = write(stop_fd_, &one, sizeof one);
  reader_.join();
}

void UffdDevice::Release() {
  if (uffd_ < 0) return;
  close(uffd_);  // wakes every waiter and unregisters the range
  uffd_ = -1;
}

int UffdDevice::ReadFaults() {
  uffd_msg messages[kReadMessages];
  const ssize_t got = read(uffd_, messages, sizeof messages);
  if (got < 0) return -errno;
  const int count = static_cast<int>(got / static_cast<ssize_t>(sizeof(uffd_msg)));
  for (int i = 0; i < count; ++i) {
    const uffd_msg& msg = messages[i];
    if (msg.event != UFFD_EVENT_PAGEFAULT) continue;
    UffdFault fault;
    const uint64_t address = msg.arg.pagefault.address;
    const uint64_t host = reinterpret_cast<uint64_t>(host_);
    fault.host = address >= host && address < host + range_bytes();
    fault.offset = address - (fault.host ? host : reinterpret_cast<uint64_t>(device_));
    fault.write = (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
    fault.write_protect = (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) != 0;
    fault.tid = msg.arg.pagefault.feat.ptid;
    handler_(fault);
  }
  return count;
}

int UffdDevice::ReceivePending() {
  if (!handler_ || uffd_ < 0) return 0;
  // Another receiver is at it: it handles what is queued, in order.
  if (!receive_mu_.TryLock()) return 0;
  int received = 0;
  for (;;) {
    const int got = ReadFaults();
    if (got <= 0) break;
    received += got;
    if (got < kReadMessages) break;  // the queue was drained
  }
  receive_mu_.Unlock();
  return received;
}

void UffdDevice::ReaderLoop() {
  pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "umlab: uffd reader: poll: %s\n", ErrnoText(errno).c_str());
      return;
    }
    if (fds[1].revents != 0) return;
    // Another receiver (ReceivePending) may have taken the messages: EAGAIN.
    int got = 0;
    {
      absl::MutexLock lock(&receive_mu_);
      got = ReadFaults();
    }
    if (got < 0 && got != -EAGAIN && got != -EINTR) {
      std::fprintf(stderr, "umlab: uffd reader: read: %s\n", ErrnoText(-got).c_str());
      return;
    }
  }
}

}  // namespace umlab
