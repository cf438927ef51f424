// SnuRHAC's block descriptor (DeepUM thesis, Table 6.1 and §6.3): for one
// 2 MB UM block, which devices map each of its pages for reading and which
// for writing, the lock that serializes fault handling on the block (steps
// 4, 5 and 11 of the fault protocol) and the read-only flag (§6.4).
//
// The thesis keeps one mask per *node* of the cluster and leaves the GPUs
// inside a node to the NVIDIA driver's own rules. umlab gives every device a
// node of its own (each emulated device has its own fault buffer and link,
// and on the uffd backend its own process), so the masks here are per
// device and the thesis's inter-node rules hold between all devices.
#ifndef UMLAB_EMU_SNURHAC_BLOCK_DESCRIPTOR_H_
#define UMLAB_EMU_SNURHAC_BLOCK_DESCRIPTOR_H_

#include <deque>
#include <optional>
#include <vector>

#include "core/page_mask.h"

namespace umlab::snurhac {

struct BlockDescriptor {
  explicit BlockDescriptor(int device_count)
      : read_masks(device_count), write_masks(device_count) {}

  // Bit m of read_masks[d]: device d maps page m of the block. A write fault
  // sets the page in both masks (§6.3), so every writer is a reader too.
  std::vector<PageMask> read_masks;
  // Bit m of write_masks[d]: device d maps page m with write protection.
  // At most one device's bit is set for a page.
  std::vector<PageMask> write_masks;
  // The lock flag (bit 0 of the thesis's flags) and who holds it: the device
  // whose faults on this block are being serviced.
  std::optional<int> lock_holder;
  // Devices waiting for the lock, served first come first served.
  std::deque<int> lock_waitlist;
  // Bit 1 of the flags: the running kernel only reads this block.
  bool read_only = false;
  // Pages whose newest data the host's memory holds (its UM space, where
  // the program's copies put the data, §6.1). Not in the thesis's table:
  // umlab's eviction rule needs it (coherence_directory.h). Every page
  // starts there; a write fault clears it, since the writer's copy becomes
  // the newest; a write-back sets it again.
  PageMask host_current = FullPageMask();

  // The device that maps `page` (an index in the block) for writing, if any.
  std::optional<int> WriterOf(int page) const {
    for (int device = 0; device < static_cast<int>(write_masks.size()); ++device) {
      if (write_masks[device].test(page)) return device;
    }
    return std::nullopt;
  }

  bool operator==(const BlockDescriptor&) const = default;
};

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_BLOCK_DESCRIPTOR_H_
