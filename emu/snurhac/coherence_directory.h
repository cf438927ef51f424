// SnuRHAC's cluster unified memory as one directory (DeepUM thesis §6.3 and
// §6.4): the block descriptors of every device, with the protocol that keeps
// several devices' copies of a page coherent. Multiple readers, single
// writer:
//
//  - a read fault maps the page read-only at the faulting device and leaves
//    every other mapping alone, a writer's included;
//  - a write fault maps it read-write at the faulting device and downgrades
//    the previous writer to read-only; readers keep their mappings;
//  - at kernel end, every device that maps a page for reading while another
//    device maps it for writing unmaps it, so that its next kernel fetches
//    the newest copy.
//
// Readers may thus hold stale copies while a kernel runs. That is CUDA's own
// rule (the thesis cites it): a grid's writes to global memory need not be
// visible to its other thread blocks before the kernel ends, and different
// devices always run different thread blocks of a kernel. At every kernel
// boundary a page is mapped read-write by one device and by nobody else, or
// read-only by any number of devices that all hold the newest data.
//
// The 12 steps of fault handling map onto the calls as follows. Steps 1 and
// 2 (fetch the fault buffer, sort, group by block) are the backend's. Step 3
// is DescriptorOwner. Steps 4 and 5 are RequestLock. Steps 6 and 7 are
// ResolveFaults: it updates the masks and returns a FaultPlan naming the page
// owners. Steps 8 to 10 are the backend carrying the plan out; step 11 is
// Unlock, which hands the lock to the next waiting device; step 12, the
// replay, is the backend's again. The directory is one object that stands
// for the descriptors spread over the owners: it records who owns what, and
// a backend charges the messages, but the state lives here.
//
// Where the thesis is silent or ambiguous, the readings taken are:
//
//  - Page owners (step 7: "the nodes where the faulted pages are
//    resident"). The newest copy of a page is at its writer if it has one.
//    Otherwise, if the host's UM space holds the newest data (the page was
//    never written, or written back since), the host serves it: its node
//    is one where the page is resident, and its copy crosses one link where
//    a device's crosses two (out of that device, into the faulting one).
//    Otherwise every device that maps it holds the newest data (see the
//    boundary rule above; a reader's copy goes stale only while a writer
//    exists), and the lowest-numbered one serves it. A page no device maps
//    is always current at the host: when the last copy of a page leaves
//    the devices, the eviction rule below writes it back first if the
//    host's is older.
//  - A write fault from a device that already maps the page for reading,
//    with no writer elsewhere, copies nothing: its copy is the newest, and
//    only the protection changes. With a writer elsewhere it fetches from
//    the writer, since its own copy may be stale.
//  - Kernel end unmaps readers of pages that some device maps with write
//    protection, exactly as printed. The directory cannot tell whether a
//    writer wrote during this kernel (a GPU does not fault on a page it
//    already may write), so write protection stands for "may have written".
//  - The read-only flag (§6.4) is set at a kernel's launch for the blocks of
//    memory objects the kernel only reads. The thesis says this lets the
//    pages be mapped to several processors and that they "do not move once
//    they are copied". Since the inter-node rule already lets readers share a
//    page, what the flag adds here is that setting it downgrades the block's
//    writer to a reader: the kernel end then has no writer to unmap the
//    readers for, and the copies stay put across kernels. A write fault on a
//    read-only block is an error: the launch found no write to it.
//  - Fault lists carry whole pages; several faults of one device on a page
//    count once, a write subsuming a read.
//
// Eviction, which the thesis does not describe (its benchmarks fit in one
// GPU's memory), is umlab's rule. A device that gives up pages of a block
// (out of frames, or because the host reads them back) takes the block's
// lock like a fault, so that no fault plan names it as a page owner while
// its copy leaves. Then, page by page:
//  - as the writer, it writes the page back to the host; other devices'
//    read-only copies of it are unmapped as well, since they may be stale
//    and, with no writer left, no kernel end would unmap them;
//  - as a reader while another device writes the page, it drops its copy;
//  - as a reader with no writer, it drops its copy if another reader or the
//    host holds the newest data, and writes the page back if it held the
//    last copy of data newer than the host's (a page written in an earlier
//    kernel whose writer the read-only flag turned into a reader).
// The descriptor keeps which pages' newest data is at the host
// (BlockDescriptor::host_current) for the last rule. After an eviction a
// page no device maps is current at the host, which the page-owner rule
// above relies on.
#ifndef UMLAB_EMU_SNURHAC_COHERENCE_DIRECTORY_H_
#define UMLAB_EMU_SNURHAC_COHERENCE_DIRECTORY_H_

#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/memory_units.h"
#include "emu/snurhac/block_descriptor.h"
#include "emu/snurhac/coherence_actions.h"

namespace umlab::snurhac {

enum class LockReply { kGranted, kQueued };

class CoherenceDirectory {
 public:
  // Devices are numbered 0 .. device_count - 1; device_count > 0.
  explicit CoherenceDirectory(int device_count);

  int device_count() const { return device_count_; }

  // Step 3: the device that keeps `block`'s descriptor.
  int DescriptorOwner(BlockNumber block) const;

  // Steps 4 and 5: `device` asks for `block`'s lock. kQueued puts it on the
  // waitlist; Unlock hands it the lock later. A device asks once per fault
  // batch: asking again while holding or waiting is an error.
  absl::StatusOr<LockReply> RequestLock(int device, BlockNumber block);
  // Step 11: `device`, which holds `block`'s lock, releases it. Returns the
  // waiting device that holds it now, if any.
  absl::StatusOr<std::optional<int>> Unlock(int device, BlockNumber block);

  // Steps 6 and 7: `device`, holding `block`'s lock, hands over its faulted
  // pages; the masks change by §6.3's rules and the plan says who copies,
  // downgrades and maps what. Pages the device already maps as the fault
  // asks are left out of the plan (duplicate faults).
  absl::StatusOr<FaultPlan> ResolveFaults(int device, BlockNumber block,
                                          const FaultedPages& pages);

  // Eviction: `device`, holding `block`'s lock, gives up `pages` (those it
  // does not map are ignored). The masks change at once; the plan says what
  // must be written back before the device's frame is free.
  absl::StatusOr<EvictionPlan> Evict(int device, BlockNumber block, const PageMask& pages);

  // §6.4: sets or clears `block`'s read-only flag, at a kernel's launch (the
  // block must not be locked). Setting it downgrades the block's writer;
  // the returned downgrades say where.
  absl::StatusOr<std::vector<Downgrade>> SetReadOnly(BlockNumber block, bool read_only);

  // §6.3, "Synchronization across the nodes": every device has finished the
  // kernel (no lock is held). Readers of pages that another device may
  // write are unmapped; the returned unmaps say where, by block, then
  // device.
  absl::StatusOr<std::vector<Unmap>> EndKernel();

  // Where a fault on `page` would fetch it from now: a device, or kHost.
  int NewestCopyHolder(PageNumber page) const;
  // `block`'s descriptor, or null if no device ever faulted on it.
  const BlockDescriptor* Find(BlockNumber block) const;

 private:
  absl::Status CheckDevice(int device) const;
  BlockDescriptor& DescriptorOf(BlockNumber block);
  // The page owner for a fetch of `page` (an index in the block).
  static int NewestCopyHolder(const BlockDescriptor& descriptor, int page);
  // Some page of the block is mapped for writing by one device and for
  // reading by another.
  static bool HasStaleReaders(const BlockDescriptor& descriptor);

  int device_count_;
  absl::flat_hash_map<BlockNumber, BlockDescriptor> descriptors_;
  int locks_held_ = 0;
  // The blocks EndKernel must visit, ordered so that its answer is
  // deterministic: those in which a fault left stale readers. Only faults
  // create stale readers, so a kernel end costs the blocks the kernel's
  // faults touched, not every block.
  std::set<BlockNumber> blocks_to_sync_;
};

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_COHERENCE_DIRECTORY_H_
