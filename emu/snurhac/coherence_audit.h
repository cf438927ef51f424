// The coherence invariants of SnuRHAC's protocol, checked inside a cluster
// run (cluster_sim.h, with check_invariants): the model checker's
// (tests/snurhac_model_check_test.cc) on the real event sequence, with
// real links, latencies and pipelining in between.
//
// Every page's data carries a version: 0 as the program's copy-in left it
// at the host, one more at each write a device makes. The audit follows
// the versions through copies (a fetch carries the version its source held
// when the page owner sent it), write-backs and unmaps, and checks:
//  - single writer: no two devices map a page for writing;
//  - a block no protocol step is under way on has masks that say exactly
//    what the devices map and with what protection;
//  - no device maps data older than the page was when the kernel began,
//    and every fetch is served the newest version;
//  - no data is lost: the newest version is at the host, at a device, or
//    on its way back to the host; where the directory would fetch it from
//    holds it; a page the directory says is current at the host is;
//  - at a kernel boundary, after the kernel-end unmaps, every mapped copy
//    is the newest and a page mapped for writing is mapped nowhere else.
#ifndef UMLAB_EMU_SNURHAC_COHERENCE_AUDIT_H_
#define UMLAB_EMU_SNURHAC_COHERENCE_AUDIT_H_

#include <cstdint>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "emu/snurhac/coherence_directory.h"

namespace umlab::snurhac {

// What the run's devices map now: their page tables.
class DeviceMappings {
 public:
  virtual ~DeviceMappings() = default;
  virtual bool Maps(int device, PageNumber page) const = 0;
  virtual bool MapsWritable(int device, PageNumber page) const = 0;
};

class CoherenceAudit {
 public:
  CoherenceAudit(int devices, const CoherenceDirectory& directory, const DeviceMappings& mappings);

  // A device wrote its copy of `page`.
  void Wrote(int device, PageNumber page);
  // A page owner (a device or kHost) sends `page`: the version it carries,
  // or an error if that is not the newest.
  absl::StatusOr<uint32_t> Send(int from, PageNumber page) const;
  // `device` maps `page`, holding `version`.
  void Landed(int device, PageNumber page, uint32_t version);
  // `device` no longer maps `page`.
  void Dropped(int device, PageNumber page);
  // `device` unmaps `page` to write it back: its version is on its way.
  void LeavesForHost(int device, PageNumber page);
  // The write-back of `page` reached the host.
  void ReachedHost(PageNumber page);

  // The next kernel begins: no copy may be older than the pages are now.
  void KernelBegins();
  // `block` may have changed; CheckTouched checks it.
  void Touch(BlockNumber block) { touched_.insert(block); }
  // Checks every block touched since the last call. `busy(block)` says a
  // protocol step is under way on it (the directory is then ahead of the
  // page tables by design, so the masks and owners are not compared).
  template <typename Busy>
  absl::Status CheckTouched(const Busy& busy) {
    for (BlockNumber block : touched_) {
      if (absl::Status status = CheckBlock(block, busy(block)); !status.ok()) return status;
      kernel_blocks_.insert(block);
    }
    touched_.clear();
    ++checks_;
    return absl::OkStatus();
  }
  // After the kernel-end unmaps: every block the kernel touched.
  absl::Status CheckKernelBoundary() const;

  uint64_t checks() const { return checks_; }

 private:
  uint32_t Latest(PageNumber page) const;
  uint32_t AtHost(PageNumber page) const;
  absl::StatusOr<uint32_t> CopyAt(int device, PageNumber page) const;
  absl::Status CheckBlock(BlockNumber block, bool busy) const;

  int devices_;
  const CoherenceDirectory& directory_;
  const DeviceMappings& mappings_;
  // Pages absent from a map hold version 0.
  absl::flat_hash_map<PageNumber, uint32_t> latest_;
  absl::flat_hash_map<PageNumber, uint32_t> host_;
  absl::flat_hash_map<PageNumber, uint32_t> at_kernel_start_;
  std::vector<absl::flat_hash_map<PageNumber, uint32_t>> copies_;  // per device: mapped copies
  absl::flat_hash_map<PageNumber, uint32_t> returning_;            // write-backs on their way
  std::set<BlockNumber> touched_;
  std::set<BlockNumber> kernel_blocks_;
  uint64_t checks_ = 0;
};

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_COHERENCE_AUDIT_H_
