// The userfaultfd "device": a range of this process that stands for GPU
// memory, with real page faults.
//
// Layout. Device memory is a memfd (shared memory) mapped twice:
//   - the device range, registered with userfaultfd in MINOR and
//     write-protect mode. The threads that play SMs touch it;
//   - a staging alias of the same memfd, not registered, through which the
//     emulator writes a block's bytes before mapping them.
// A second memfd is the host backing store, each page's home copy.
// Device memory is cut into 2 MiB slots; the backend gives each program
// block a slot.
//
// Why minor faults: a page's bytes are in the memfd's page cache all along,
// and "mapped on the device" means only that the device range has a page
// table entry for it. Migrating is then memcpy into the alias plus one
// UFFDIO_CONTINUE that installs up to 512 entries, which is most of memcpy's
// speed; UFFDIO_COPY allocates and copies page by page and reaches about a
// quarter. Unmapping is MADV_DONTNEED on the device range: it drops the page
// table entries and keeps the bytes, so an eviction can unmap first (every
// later touch faults) and write back from the alias afterwards with no
// writer racing it.
//
// Read and write faults are told apart by the kernel's fault flags. Pages
// are mapped write-protected so that the first write to each traps
// (UFFD_PAGEFAULT_FLAG_WP): that is the device's dirty bit, set before the
// write can happen.
//
// Physical memory: the page cache keeps a copy of every slot used, so the
// process holds about twice the program's footprint. The capacity limit is
// on mapped 2 MiB frames, which the backend enforces.
#ifndef UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_
#define UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

// One page fault as the kernel reported it.
struct UffdFault {
  uint64_t offset = 0;         // byte offset in the device range
  bool write = false;          // a store (UFFD_PAGEFAULT_FLAG_WRITE)
  bool write_protect = false;  // a store to a mapped, write-protected page
  uint32_t tid = 0;            // the faulting thread (gettid)
};

class UffdDevice {
 public:
  struct Options {
    uint64_t max_blocks = 32768;  // device range size, in 2 MiB slots (64 GiB)
    std::string name = "umlab-uffd";
  };

  // How a userfaultfd descriptor is obtained: through the syscall
  // (`device_node` false) or /dev/userfaultfd (true). Returns the descriptor
  // or -errno. Tests replace it to see the error a machine without
  // userfaultfd gives.
  using Opener = std::function<int(bool device_node)>;
  static void SetOpenerForTesting(Opener opener);  // nullptr: the real one

  // Fails with a one-line, actionable message when userfaultfd is not
  // available to this process.
  static absl::StatusOr<std::unique_ptr<UffdDevice>> Create(const Options& options);
  ~UffdDevice();
  UffdDevice(const UffdDevice&) = delete;
  UffdDevice& operator=(const UffdDevice&) = delete;

  // Makes `count` more slots usable: allocates their device pages and their
  // host copies up front, so that transfers never pay for page allocation.
  absl::Status AddSlots(uint64_t count);
  uint64_t slots() const { return slots_; }

  // Where a slot's page lives in the device range (what SMs touch).
  char* DevicePage(uint64_t slot, int page) const {
    return device_ + slot * kBlockSize + static_cast<uint64_t>(page) * kPageSize;
  }
  uint64_t range_bytes() const { return options_.max_blocks * kBlockSize; }

  // --- Data movement (host <-> the staging alias); no page table change ---
  // Host copy -> device pages for `copy`, zeroes for `zero`.
  void CopyIn(uint64_t slot, const PageMask& copy, const PageMask& zero);
  // Device pages -> host copy.
  void CopyOut(uint64_t slot, const PageMask& pages);

  // --- The device page table ---
  // Maps `pages` (none may be mapped), write-protected if asked. Does not
  // wake anyone: stalled accessors wait for a replay.
  absl::Status Map(uint64_t slot, const PageMask& pages, bool write_protect);
  // Unmaps `pages`; their bytes stay in device memory. The next touch faults.
  absl::Status Unmap(uint64_t slot, const PageMask& pages);
  // Lets the stalled accessors of [offset, offset + length) retry.
  absl::Status Wake(uint64_t offset, uint64_t length);
  // Lifts write protection on one mapped page and wakes its writers.
  absl::Status AllowWrite(uint64_t offset);

  // --- Faults ---
  // Starts the reader thread, which calls `handler` for every fault it
  // receives, in order of arrival. Signals are blocked in it.
  absl::Status StartReader(std::function<void(const UffdFault&)> handler);
  // Receives the fault messages already queued, without waiting, and calls
  // the reader's handler for each on the calling thread; returns how many.
  // For a thread that polls for work anyway (the backend's service thread):
  // it gets a fault as soon as it looks, without waiting for the reader to
  // wake up. The reader and any number of such callers may receive at once;
  // each message goes to exactly one of them, so the handler must be
  // thread-safe. Only between StartReader and StopReader.
  int ReceivePending();
  // Stops and joins the reader thread.
  void StopReader();
  // Closes the userfaultfd: every stalled accessor is released and the
  // range becomes ordinary memory. For teardown; no fault reaches anyone
  // after this.
  void Release();

 private:
  explicit UffdDevice(const Options& options) : options_(options) {}
  absl::Status Init();
  void ReaderLoop();
  // One read() of up to 64 messages, each passed to handler_. Returns the
  // number of messages, or -errno (-EAGAIN: none queued).
  int ReadFaults();

  Options options_;
  int uffd_ = -1;
  int device_fd_ = -1;
  int host_fd_ = -1;
  int stop_fd_ = -1;  // eventfd that stops the reader
  char* device_ = nullptr;
  char* staging_ = nullptr;
  char* host_ = nullptr;
  uint64_t slots_ = 0;
  std::function<void(const UffdFault&)> handler_;  // set before the reader starts
  std::thread reader_;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_
