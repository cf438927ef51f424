// `demand`: the naive unified-memory baseline. Migrates exactly the pages
// that fault, prefetches nothing, and evicts the least recently migrated
// block, as the UVM driver does by default.
#ifndef UMLAB_POLICIES_DEMAND_DEMAND_H_
#define UMLAB_POLICIES_DEMAND_DEMAND_H_

#include "core/policy.h"

namespace umlab {

class DemandPolicy final : public Policy {
  // Every decision is the Policy default: faulted pages only, and the least
  // recently migrated block as victim.
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_DEMAND_DEMAND_H_
