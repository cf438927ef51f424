#include "backends/emu/storage_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backends/emu/system_error.h"

namespace umlab {
namespace {

// An unnamed file in `directory`: O_TMPFILE where the filesystem has it,
// else a named one unlinked at once.
int OpenUnnamed(const std::string& directory, int flags) {
  int fd = open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | flags, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string path = directory + "/umlab-storage-XXXXXX";
  fd = mkostemp(path.data(), O_CLOEXEC | flags);
  if (fd >= 0) unlink(path.c_str());
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<StorageFile>> StorageFile::Create(const std::string& directory) {
  std::unique_ptr<StorageFile> file(new StorageFile());
  // O_DIRECT where the filesystem allows it (tmpfs refuses it: EINVAL).
  file->fd_ = OpenUnnamed(directory, O_DIRECT);
  file->direct_ = file->fd_ >= 0;
  if (file->fd_ < 0) file->fd_ = OpenUnnamed(directory, 0);
  if (file->fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "uffd storage: cannot create a file in '%s' (%s); give a writable directory with "
        "--backend=uffd:storage_dir=DIR",
        directory, ErrnoText(errno)));
  }
  void* buffers = mmap(nullptr, kDepth * kChunk, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffers == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("uffd storage: no memory for I/O buffers (%s)", ErrnoText(errno)));
  }
  file->buffers_ = static_cast<char*>(buffers);
  absl::MutexLock lock(&file->mu_);
  const int ring = io_uring_queue_init(kDepth, &file->ring_, 0);
  if (ring < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "uffd storage: io_uring is not available (%s); the storage tier needs Linux 5.6 or "
        "later with io_uring enabled (kernel.io_uring_disabled=0)",
        ErrnoText(-ring)));
  }
  file->ring_ready_ = true;
  iovec vectors[kDepth];
  for (int i = 0; i < kDepth; ++i) vectors[i] = {file->buffers_ + i * kChunk, kChunk};
  // Refused under a small RLIMIT_MEMLOCK: plain buffers then.
  file->registered_ = io_uring_register_buffers(&file->ring_, vectors, kDepth) == 0;
  return file;
}

StorageFile::~StorageFile() {
  {
    absl::MutexLock lock(&mu_);
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }
  if (buffers_ != nullptr) munmap(buffers_, kDepth * kChunk);
  if (fd_ >= 0) close(fd_);
}

absl::Status StorageFile::Write(uint64_t offset, const char* data, uint64_t length) {
  // Transfer copies out of `data` on a write; it never writes to it.
  return Transfer(true, offset, const_cast<char*>(data), length);
}

absl::Status StorageFile::Read(uint64_t offset, char* data, uint64_t length) {
  return Transfer(false, offset, data, length);
}

uint64_t StorageFile::bytes_written() const {
  absl::MutexLock lock(&mu_);
  return written_;
}

uint64_t StorageFile::bytes_read() const {
  absl::MutexLock lock(&mu_);
  return read_;
}

absl::Status StorageFile::Transfer(bool write, uint64_t offset, char* data, uint64_t length) {
  absl::MutexLock lock(&mu_);
  struct Request {
    uint64_t done = 0;    // bytes of the range before this chunk
    uint64_t length = 0;
  };
  Request requests[kDepth];
  bool busy[kDepth] = {};
  int in_flight = 0;
  uint64_t next = 0;  // bytes of the range submitted so far
  absl::Status status;
  while ((next < length && status.ok()) || in_flight > 0) {
    // Fill every free buffer, then submit them together.
    int queued = 0;
    for (int i = 0; i < kDepth && next < length && status.ok(); ++i) {
      if (busy[i]) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      const uint64_t chunk = std::min(kChunk, length - next);
      char* buffer = buffers_ + i * kChunk;
      if (write) std::memcpy(buffer, data + next, chunk);
      const off_t at = static_cast<off_t>(offset + next);
      if (registered_ && write) {
        io_uring_prep_write_fixed(sqe, fd_, buffer, static_cast<unsigned>(chunk), at, i);
      } else if (registered_) {
        io_uring_prep_read_fixed(sqe, fd_, buffer, static_cast<unsigned>(chunk), at, i);
      } else if (write) {
        io_uring_prep_write(sqe, fd_, buffer, static_cast<unsigned>(chunk), at);
      } else {
        io_uring_prep_read(sqe, fd_, buffer, static_cast<unsigned>(chunk), at);
      }
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(i));
      requests[i] = {next, chunk};
      busy[i] = true;
      next += chunk;
      ++in_flight;
      ++queued;
    }
    if (queued > 0) {
      const int submitted = io_uring_submit(&ring_);
      if (submitted < 0) {
        return absl::InternalError(absl::StrFormat("uffd storage: io_uring submit: %s",
                                                   ErrnoText(-submitted)));
      }
    }
    io_uring_cqe* cqe = nullptr;
    const int waited = io_uring_wait_cqe(&ring_, &cqe);
    if (waited < 0) {
      if (waited == -EINTR) continue;
      return absl::InternalError(
          absl::StrFormat("uffd storage: io_uring wait: %s", ErrnoText(-waited)));
    }
    const int i = static_cast<int>(io_uring_cqe_get_data64(cqe));
    const int result = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    busy[i] = false;
    --in_flight;
    const Request& request = requests[i];
    if (result < 0 || static_cast<uint64_t>(result) != request.length) {
      // A read past what was ever written comes back short: that is a bug
      // in the caller, not in storage, and as fatal.
      status.Update(absl::DataLossError(absl::StrFormat(
          "uffd storage: %s of %d bytes at %d %s", write ? "write" : "read", request.length,
          offset + request.done,
          result < 0 ? ErrnoText(-result) : absl::StrFormat("moved %d", result))));
      continue;
    }
    if (!write) std::memcpy(data + request.done, buffers_ + i * kChunk, request.length);
  }
  if (status.ok()) (write ? written_ : read_) += length;
  return status;
}

}  // namespace umlab
