// `g10-base-uvm`: G10's base UVM baseline (its artifact's `lru`
// configuration: is_UVM 1, use_prefetch 0, eviction_policy LRU).
//
// Its decisions are demand's: a kernel's missing pages migrate when it
// faults on them, nothing is prefetched, and the page that arrived longest
// ago goes back to the host to make room. What sets G10's numbers apart is
// not a decision but its fault model, which is the sim's `faults=g10`:
// `umlab run --workload=g10 --device=g10-a100 --backend=sim:faults=g10
// --policy=g10-base-uvm` reproduces G10's BERT_Base figure (docs/g10.md).
// On the default
// `faults=batched` it runs as `demand` does.
#include <memory>

#include "core/policy.h"
#include "policies/demand/demand.h"

namespace umlab {

UMLAB_REGISTER_POLICY(
    g10_base_uvm,
    {"g10-base-uvm",
     "G10's (MICRO '23) base UVM: demand's decisions (faulted pages, least recently migrated "
     "victim, written back to the host); G10's figures need its fault model, "
     "--backend=sim:faults=g10",
     {},
     [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
       return std::make_unique<DemandPolicy>();
     }});

}  // namespace umlab
