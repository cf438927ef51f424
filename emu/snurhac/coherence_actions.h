// What the coherence directory tells a backend to do: the data movement and
// mapping changes of SnuRHAC's fault protocol (DeepUM thesis §6.3), as plain
// values. The directory only decides; a backend (the sim charging links and
// latencies, the uffd processes moving bytes over sockets) carries them out,
// in the order a plan lists them.
#ifndef UMLAB_EMU_SNURHAC_COHERENCE_ACTIONS_H_
#define UMLAB_EMU_SNURHAC_COHERENCE_ACTIONS_H_

#include <vector>

#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab::snurhac {

// The holder of a page's data that is no device: the host's memory, where
// the program's copies put the data (the "host UM space" of §6.1).
inline constexpr int kHost = -1;

// The pages of one block that a device faulted on (steps 1 and 2: fetched
// from its fault buffer and grouped by block). A page in both masks is a
// write fault.
struct FaultedPages {
  PageMask read;
  PageMask write;
};

// Step 9: `from` (a device, or kHost) copies `pages` to the faulting device.
struct Fetch {
  int from = kHost;
  PageMask pages;

  bool operator==(const Fetch&) const = default;
};

// Write protection on `pages` is revoked at `device`, which keeps them
// mapped for reading (§6.3, a write fault's third rule). Carried out by the
// page owner before it copies the pages out (step 9): a write that landed
// between the copy and the downgrade would be lost.
struct Downgrade {
  int device = 0;
  BlockNumber block = 0;
  PageMask pages;

  bool operator==(const Downgrade&) const = default;
};

// `device` unmaps `pages`; its next access faults and fetches the newest
// copy (§6.3, "Synchronization across the nodes").
struct Unmap {
  int device = 0;
  BlockNumber block = 0;
  PageMask pages;

  bool operator==(const Unmap&) const = default;
};

// Steps 7 to 10 for one device's faults on one block.
struct FaultPlan {
  int device = 0;
  BlockNumber block = 0;
  // Where the lock request and the fault list went (steps 4 to 7): a
  // backend charges those messages to the link between `device` and it.
  int descriptor_owner = 0;
  // First: the page owners revoke write protection.
  std::vector<Downgrade> downgrades;
  // Then the copies to `device`, one per source (the page owners of step 7).
  std::vector<Fetch> fetches;
  // Step 10: `device` maps these pages read-only ...
  PageMask map_read;
  // ... and these read-write. A page here that no fetch carries is one the
  // device already maps for reading with the newest data: its protection is
  // upgraded in place.
  PageMask map_write;
};

// Evicting pages of a block from a device (umlab's rule; the thesis has
// none, coherence_directory.h): what leaves, what must reach the host
// first, and whose copies become unreachable.
struct EvictionPlan {
  int device = 0;
  BlockNumber block = 0;
  // Where the lock request and the eviction notice went.
  int descriptor_owner = 0;
  // `device` unmaps these at once: every page asked for that it mapped.
  PageMask unmap;
  // Of them, those whose newest data exists nowhere else: copied to the
  // host before the device lets its frame go.
  PageMask write_back;
  // Readers of pages `device` wrote, unmapped too: their copies may be
  // stale, and with the writer gone no kernel end would unmap them.
  std::vector<Unmap> unmaps;
};

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_COHERENCE_ACTIONS_H_
