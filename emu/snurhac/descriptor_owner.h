// Which device keeps a block's descriptor (DeepUM thesis §6.3, "Distributed
// block descriptors"): descriptors are dealt out 32 blocks at a time, round
// robin, so that the lock requests and fault lists of a fault storm spread
// over the interconnect instead of converging on one node. Node 0 keeps
// blocks 0 to 31, node 1 blocks 32 to 63, and so on.
//
// The thesis numbers the UM blocks of the program's UM space; umlab numbers
// blocks by address (core/memory_units.h), so a run of 32 is 64 MB of
// address space, aligned to 64 MB.
#ifndef UMLAB_EMU_SNURHAC_DESCRIPTOR_OWNER_H_
#define UMLAB_EMU_SNURHAC_DESCRIPTOR_OWNER_H_

#include "core/memory_units.h"

namespace umlab::snurhac {

inline constexpr BlockNumber kDescriptorRunBlocks = 32;

// `device_count` > 0.
constexpr int DescriptorOwner(BlockNumber block, int device_count) {
  return static_cast<int>((block / kDescriptorRunBlocks) % static_cast<BlockNumber>(device_count));
}

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_DESCRIPTOR_OWNER_H_
