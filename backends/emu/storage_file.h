// The uffd device's storage tier: a file written and read through io_uring.
//
// Evictions to storage write their pages here, and migrations from storage
// read them back (UffdDevice::StoreHostCopy and LoadHostCopy). The file is
// unnamed (O_TMPFILE, or created and unlinked at once) in a directory of the
// user's choice, opened with O_DIRECT where the filesystem allows it (tmpfs
// does not), so that a disk-backed directory really does storage I/O rather
// than page-cache copies. Requests go through bounce buffers registered with
// the ring (fixed buffers: no page pinning per request), several in flight
// at once; where registration is refused (RLIMIT_MEMLOCK), plain buffers.
// Thread-safe: one request batch at a time.
#ifndef UMLAB_BACKENDS_EMU_STORAGE_FILE_H_
#define UMLAB_BACKENDS_EMU_STORAGE_FILE_H_

#include <liburing.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace umlab {

class StorageFile {
 public:
  // Opens a fresh file in `directory`. Fails in one line, saying what to do.
  static absl::StatusOr<std::unique_ptr<StorageFile>> Create(const std::string& directory);
  ~StorageFile();
  StorageFile(const StorageFile&) = delete;
  StorageFile& operator=(const StorageFile&) = delete;

  // `length` bytes at `offset`, both multiples of 4 KiB; `data` any address.
  absl::Status Write(uint64_t offset, const char* data, uint64_t length);
  absl::Status Read(uint64_t offset, char* data, uint64_t length);

  bool direct() const { return direct_; }          // O_DIRECT took
  bool registered() const { return registered_; }  // fixed buffers took
  uint64_t bytes_written() const;
  uint64_t bytes_read() const;

 private:
  StorageFile() = default;
  // Moves [offset, offset + length) in chunks, up to kDepth in flight.
  absl::Status Transfer(bool write, uint64_t offset, char* data, uint64_t length);

  static constexpr int kDepth = 8;                     // requests in flight
  static constexpr uint64_t kChunk = 256 * 1024;       // bytes per request

  int fd_ = -1;
  bool direct_ = false;
  bool registered_ = false;
  bool ring_ready_ = false;
  char* buffers_ = nullptr;  // kDepth chunks, 4 KiB aligned
  mutable absl::Mutex mu_;
  io_uring ring_ ABSL_GUARDED_BY(mu_);
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t read_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_STORAGE_FILE_H_
