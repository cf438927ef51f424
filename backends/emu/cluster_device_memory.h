// A device's view of the unified range in the uffd cluster
// (backends/emu/uffd_cluster.h): the program's whole range, mapped
// anonymous and private in the device's own process and registered with
// the process's own userfaultfd in MISSING and write-protect (WP) mode.
// Its page table is the device's:
//  - unmapped: a touch is a MISSING fault;
//  - mapped read-only: installed by UFFDIO_COPY with MODE_WP, so a store is
//    a WP fault (the GPU's write fault on a read-only page);
//  - mapped read-write: installed without WP, or WP lifted in place.
// A downgrade is UFFDIO_WRITEPROTECT on a mapped page (stores then fault,
// and the ioctl's TLB flush has finished every store made before it); an
// unmap is MADV_DONTNEED (the next touch is MISSING again).
//
// The mapping state of every page is also kept here, under a mutex, since
// the fault handler and the server of the process both change it and the
// server must never read a page the device does not map (its own read
// would fault into its own handler).
#ifndef UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_MEMORY_H_
#define UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

enum class PageMapping : uint8_t { kUnmapped, kReadOnly, kReadWrite };

// A fault as the handler reads it.
struct ClusterFault {
  PageNumber page = 0;
  bool write = false;
};

class ClusterDeviceMemory {
 public:
  // `bytes`: the program's range, from address 0. Fails in one line when
  // userfaultfd or its write protection on anonymous memory is missing.
  static absl::StatusOr<std::unique_ptr<ClusterDeviceMemory>> Create(uint64_t bytes);
  ~ClusterDeviceMemory();
  ClusterDeviceMemory(const ClusterDeviceMemory&) = delete;
  ClusterDeviceMemory& operator=(const ClusterDeviceMemory&) = delete;

  // What the device's threads touch.
  char* base() const { return base_; }
  uint64_t pages() const { return pages_; }
  int uffd() const { return uffd_; }

  PageMapping Mapping(PageNumber page) const;
  // The pages of `block` mapped now.
  PageMask Mapped(BlockNumber block) const;

  // Installs `pages` of `block` with the bytes in `data` (a page each, in
  // page order), read-only if `write_protect`. A page mapped now is
  // replaced (a stale reader's copy fetched anew for a write).
  absl::Status Install(BlockNumber block, const PageMask& pages, const char* data,
                       bool write_protect);
  // Lifts write protection on mapped read-only pages (an upgrade in place).
  absl::Status AllowWrite(BlockNumber block, const PageMask& pages);
  // Write-protects mapped pages (a downgrade). Every page must be mapped.
  absl::Status ProtectWrite(BlockNumber block, const PageMask& pages);
  // Copies mapped pages out, a page each in page order. Every page must be
  // mapped: the server asks this, and never reads what it does not map.
  absl::StatusOr<std::string> Read(BlockNumber block, const PageMask& pages) const;
  // Drops the mappings; the next touch faults.
  absl::Status Unmap(BlockNumber block, const PageMask& pages);
  // Lets the threads stalled on `pages` retry.
  absl::Status Wake(BlockNumber block, const PageMask& pages);

  // The device's page table as the kernel has it (/proc/self/pagemap), not
  // as this object believes: the pages of `block` present, and of those the
  // ones without userfaultfd write protection. For the kernel-end audit.
  absl::StatusOr<std::pair<PageMask, PageMask>> PageTable(BlockNumber block) const;

  // Reads the fault messages queued now (none: an empty vector); waits up
  // to `timeout_ms` for the first, or until `wake_fd` (-1: none) is
  // readable, which it leaves to the caller to consume. Returns faults in
  // arrival order.
  absl::StatusOr<std::vector<ClusterFault>> ReadFaults(int timeout_ms, int wake_fd = -1);

 private:
  ClusterDeviceMemory() = default;
  absl::Status CheckMapped(BlockNumber block, const PageMask& pages, const char* what) const;
  // AllowWrite and ProtectWrite: lifts or sets the protection of mapped pages.
  absl::Status SetWriteProtection(BlockNumber block, const PageMask& pages, bool protect);

  int uffd_ = -1;
  int pagemap_fd_ = -1;
  char* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t pages_ = 0;
  mutable std::mutex mutex_;
  std::vector<PageMapping> mapping_;  // per page, under mutex_
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CLUSTER_DEVICE_MEMORY_H_
