// The userfaultfd "device": a range of this process that stands for GPU
// memory, with real page faults.
//
// Layout. Device memory is a memfd (shared memory) mapped once, as the
// device range, registered with userfaultfd in MISSING, MINOR and
// write-protect mode; the threads that play SMs touch it. The emulator
// moves its bytes through the file (pwrite/pread) or through a second,
// unregistered mapping of it (the staging alias), never through the device
// range. A second memfd, mapped, is the host backing store, each page's
// home copy. Device memory is cut into 2 MiB slots; the backend gives each
// program block a slot.
//
// Why minor faults: while a block holds a frame its bytes are in the
// memfd's page cache, and "mapped on the device" means only that the device
// range has a page table entry for them. Migrating is then a copy into the
// page cache plus one UFFDIO_CONTINUE that installs up to 512 entries;
// UFFDIO_COPY allocates and copies page by page and reaches about a
// quarter of memcpy. The copy is a pwrite for pages that hold no memory
// (it allocates them without zeroing) and streaming stores through the
// alias for pages that do (no allocation, and about twice write(2)'s
// speed, which copies 4 KiB at a time through the cache). Unmapping is
// MADV_DONTNEED on the device range: it drops the page table entries and
// keeps the bytes, so an eviction can unmap first (every later touch
// faults) and write back from the page cache afterwards with no writer
// racing it.
//
// Read and write faults are told apart by the kernel's fault flags. Pages
// are mapped write-protected so that the first write to each traps
// (UFFD_PAGEFAULT_FLAG_WP): that is the device's dirty bit, set before the
// write can happen.
//
// Physical memory: the host copies (the program's footprint) plus the page
// cache of the slots that hold a frame. The backend releases a slot's page
// cache (ReleaseFrame) when its block gives up its frame, so device memory
// stays within the capacity. A touch of a slot page with no page cache is a
// MISSING fault, serviced like a minor one.
//
// Huge frames (Options::huge_pages): device memory is a hugetlb memfd of
// 2 MiB pages instead, so a frame is one huge page and one UFFDIO_CONTINUE
// maps it with a single PMD (about 3 us where 512 PTEs take 170-350 us).
// hugetlbfs has no write(), so bytes go in through the alias, and a
// frame's huge page is allocated by fallocate first, which fails cleanly
// when the pool is empty where a store would SIGBUS.
// The page table then has 2 MiB granularity: Map and Unmap take whole
// blocks only, and AllowWrite lifts the protection of the whole frame. The
// pages come from the pool reserved in vm.nr_hugepages (2 MiB size), which
// this class never changes.
//
// Device memory on a tmpfs mount (Options::directory): an unnamed file
// (O_TMPFILE) there instead of a memfd, with the same 4 KiB page table. Its
// point is a mount with `huge=within_size` (or `always`): the page cache
// then holds a frame in one 2 MiB folio, so a migration into a released
// frame allocates once instead of 512 times (write(2) into a memfd
// allocates a 4 KiB page at a time, most of the cost of such a migration),
// while mapping, unmapping and write protection stay per 4 KiB page, so
// every policy runs. A memfd cannot ask for this itself: its folio size
// follows the machine-wide transparent_hugepage/shmem_enabled. Memory:
// a frame that holds any page holds its whole 2 MiB folio, which is what
// the capacity counts a frame as anyway.
#ifndef UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_
#define UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/memory_units.h"
#include "backends/emu/storage_file.h"
#include "core/page_mask.h"

namespace umlab {

// One page fault as the kernel reported it.
struct UffdFault {
  uint64_t offset = 0;         // byte offset in the device range
  bool write = false;          // a store (UFFD_PAGEFAULT_FLAG_WRITE)
  bool write_protect = false;  // a store to a mapped, write-protected page
  uint32_t tid = 0;            // the faulting thread (gettid)
  // A write to a write-protected page of the host copies (ProtectHost):
  // `offset` is then in the host copies, and the writer sleeps until the
  // protection is lifted.
  bool host = false;
};

class UffdDevice {
 public:
  struct Options {
    uint64_t max_blocks = 32768;  // device range size, in 2 MiB slots (64 GiB)
    std::string name = "umlab-uffd";
    bool huge_pages = false;  // hugetlb frames, whole blocks only (see above)
    // Empty: device memory is a memfd. Else a tmpfs directory: device
    // memory is an unnamed file there (see above). Not with huge_pages.
    std::string directory;
    // Not empty: a storage tier behind the host copies, as an io_uring file
    // in this directory (StoreHostCopy, LoadHostCopy).
    std::string storage_directory;
  };

  // 2 MiB hugetlb pages free in the system's pool now (0 if unknown).
  static uint64_t FreeHugePages();

  // How a userfaultfd descriptor is obtained: through the syscall
  // (`device_node` false) or /dev/userfaultfd (true). Returns the descriptor
  // or -errno. Tests replace it to see the error a machine without
  // userfaultfd gives.
  using Opener = std::function<int(bool device_node)>;
  static void SetOpenerForTesting(Opener opener);  // nullptr: the real one
  // A userfaultfd descriptor (O_CLOEXEC | O_NONBLOCK, user-mode faults), or
  // the one-line error Create gives; for other users of userfaultfd (the
  // uffd cluster's device processes).
  static absl::StatusOr<int> OpenDescriptor();

  // Fails with a one-line, actionable message when userfaultfd is not
  // available to this process.
  static absl::StatusOr<std::unique_ptr<UffdDevice>> Create(const Options& options);
  ~UffdDevice();
  UffdDevice(const UffdDevice&) = delete;
  UffdDevice& operator=(const UffdDevice&) = delete;

  // Makes `count` more slots usable: allocates their host copies up front.
  // Their device memory is allocated by CopyIn and freed by ReleaseFrame.
  absl::Status AddSlots(uint64_t count);
  uint64_t slots() const { return slots_; }

  // Where a slot's page lives in the device range (what SMs touch).
  char* DevicePage(uint64_t slot, int page) const {
    return device_ + slot * kBlockSize + static_cast<uint64_t>(page) * kPageSize;
  }
  // Where a slot's page has its host copy (what a host kernel touches, and
  // what a remote mapping shows the device).
  char* HostPage(uint64_t slot, int page) const {
    return host_ + slot * kBlockSize + static_cast<uint64_t>(page) * kPageSize;
  }
  // The device memory behind a slot's page through the unregistered alias
  // (never a fault): what a DMA copy writes or reads on a resident page.
  char* DeviceMemory(uint64_t slot, int page) const {
    return staging_ + slot * kBlockSize + static_cast<uint64_t>(page) * kPageSize;
  }
  uint64_t range_bytes() const { return options_.max_blocks * kBlockSize; }
  bool huge_pages() const { return options_.huge_pages; }

  // --- Data movement (host <-> device memory); no page table change ---
  // Host copy -> device pages for `copy`, zeroes for `zero`. Allocates the
  // device pages that hold no memory. Fails only when memory runs out.
  absl::Status CopyIn(uint64_t slot, const PageMask& copy, const PageMask& zero);
  // Device pages -> host copy.
  absl::Status CopyOut(uint64_t slot, const PageMask& pages);
  // Writes `length` bytes into the host copies at `offset` with pwrite, as a
  // DMA engine writes host memory: past the CPU's page table, so a page
  // write-protected against host stores (ProtectHost) takes it.
  absl::Status WriteHostCopy(uint64_t offset, const void* data, uint64_t length);
  // Reads `length` bytes of the host copies at `offset` into `out` with
  // pread: what a staging thread copies from a source that the CPU's page
  // table may have write-protected meanwhile.
  absl::Status ReadHostCopy(uint64_t offset, void* out, uint64_t length) const;
  // Zeroes the host copy of `pages`: they hold no data yet, and their first
  // touch in host memory must find zeroes, as a migration zero-fills them.
  void ZeroHostCopy(uint64_t slot, const PageMask& pages);
  // --- The storage tier (Options::storage_directory) ---
  // Host copy -> storage for `pages`, then frees them in host memory: the
  // storage file holds the only copy until LoadHostCopy.
  absl::Status StoreHostCopy(uint64_t slot, const PageMask& pages);
  // Storage -> host copy for `pages` (which StoreHostCopy wrote).
  absl::Status LoadHostCopy(uint64_t slot, const PageMask& pages);
  // Null without a storage tier.
  const StorageFile* storage() const { return storage_.get(); }

  // Frees the slot's device memory (none of it may be mapped): its bytes are
  // gone, and the next CopyIn allocates afresh.
  absl::Status ReleaseFrame(uint64_t slot);
  // Device memory allocated now, as the kernel counts it (the memfd's
  // blocks): what the frames really occupy.
  uint64_t DeviceBytesAllocated() const;

  // --- The device page table ---
  // Maps `pages` (none may be mapped), write-protected if asked. Does not
  // wake anyone: stalled accessors wait for a replay. With huge frames,
  // `pages` must be the whole block (InvalidArgument otherwise), for Unmap too.
  absl::Status Map(uint64_t slot, const PageMask& pages, bool write_protect);
  // Maps one page that the caller believes mapped (with huge frames, its
  // whole frame): true if its entry was missing and is now restored from
  // device memory, false if it was there. Does not wake anyone.
  absl::StatusOr<bool> RestoreMapping(uint64_t slot, int page, bool write_protect);
  // Unmaps `pages`; their bytes stay in device memory. The next touch faults.
  absl::Status Unmap(uint64_t slot, const PageMask& pages);
  // Lets the stalled accessors of [offset, offset + length) retry.
  absl::Status Wake(uint64_t offset, uint64_t length);

  // --- Remote mappings (the device reaching host memory) ---
  // Puts the host copy of `pages` (none of them mapped) in the device range
  // in place of device memory: mmap(MAP_FIXED | MAP_SHARED) of the host
  // memfd over those pages. Touching them then reads and writes the host
  // copy itself, with no fault (the new mapping is not registered with
  // userfaultfd) and no device memory. `zero` pages (of `pages`) have their
  // host copy zeroed first. Not with huge frames: a hugetlb mapping splits
  // at 2 MiB only.
  absl::Status MapHostCopy(uint64_t slot, const PageMask& pages, const PageMask& zero);
  // Puts device memory back under `pages` (which MapHostCopy mapped),
  // registered with userfaultfd again (a new mapping is a new VMA, which
  // the range's registration does not cover) and with nothing mapped: the
  // next touch faults. The host copy keeps every byte written meanwhile.
  // Nothing may touch the pages while this runs (see the .cc).
  absl::Status UnmapHostCopy(uint64_t slot, const PageMask& pages);
  // Lifts write protection on one mapped page (with huge frames: on its
  // whole frame) and wakes its writers.
  absl::Status AllowWrite(uint64_t offset);

  // --- Write protection of host copies (a hidden copy's source) ---
  // The host copies are registered with userfaultfd in write-protect mode:
  // while [offset, offset + length) of them is protected, a store there
  // sleeps in the kernel (its fault reaches the handler with `host` set)
  // until the protection is lifted, which wakes it. Whole pages.
  absl::Status ProtectHost(uint64_t offset, uint64_t length, bool protect);

  // --- Faults ---
  // Starts the reader thread, which calls `handler` for every fault it
  // receives, in order of arrival. Signals are blocked in it.
  absl::Status StartReader(std::function<void(const UffdFault&)> handler);
  // Receives the fault messages already queued, without waiting, and calls
  // the reader's handler for each on the calling thread; returns how many.
  // For a thread that polls for work anyway (the backend's service thread):
  // it gets a fault as soon as it looks, without waiting for the reader to
  // wake up. One receiver at a time reads and handles messages (the others
  // find the queue taken and return 0 at once), so messages are handled in
  // the order the kernel queued them: a later fault of the same thread
  // never overtakes an earlier one. The handler must still be thread-safe,
  // as it runs on whichever thread received. Only between StartReader and
  // StopReader.
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
  // The slot's pages that hold device memory now, as far as the kernel
  // tells cheaply (see the definition); decides how CopyIn and CopyOut
  // copy, never whether they are right.
  PageMask PagesWithMemory(uint64_t slot) const;
  // step(offset, length) over the runs of `pages` in the slot, in the host
  // copy's and the storage file's offsets, until one fails. Needs storage.
  absl::Status ForEachStorageRun(
      uint64_t slot, const PageMask& pages,
      absl::FunctionRef<absl::Status(uint64_t offset, uint64_t length)> step);
  // Whole-block check for the huge-frame page table.
  absl::Status RequireWholeBlock(const PageMask& pages, const char* what) const;
  // UFFDIO_REGISTER of part of the device range, in every mode it uses.
  absl::Status Register(char* start, uint64_t length);
  void ReaderLoop();
  // One read() of up to 64 messages, each passed to handler_, under
  // receive_mu_. Returns the number of messages, or -errno (-EAGAIN: none
  // queued).
  int ReadFaults() ABSL_EXCLUSIVE_LOCKS_REQUIRED(receive_mu_);

  Options options_;
  int uffd_ = -1;
  int device_fd_ = -1;
  int host_fd_ = -1;
  int stop_fd_ = -1;  // eventfd that stops the reader
  char* device_ = nullptr;
  char* host_ = nullptr;
  char* zeroes_ = nullptr;  // 2 MiB that read as zero
  char* staging_ = nullptr;  // unregistered alias of device memory: CopyIn, CopyOut
  uint64_t slots_ = 0;
  std::unique_ptr<StorageFile> storage_;
  std::function<void(const UffdFault&)> handler_;  // set before the reader starts
  // Held from a read() of messages until the last of them is handled. Two
  // receivers each handling its own read at once could handle a thread's
  // fault before its earlier one, which it read first: the backend would
  // then take the thread as asleep on the earlier page while it sleeps on
  // the later (UffdBackend::AwaitAccessorsOf waited forever on that).
  absl::Mutex receive_mu_;
  std::thread reader_;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_UFFD_DEVICE_H_
