#include "policies/demand/demand.h"

#include <memory>

namespace umlab {

UMLAB_REGISTER_POLICY(
    demand, {"demand",
             "no prefetch; evicts the least recently migrated 2 MB block (naive UM baseline)",
             {},
             [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
               return std::make_unique<DemandPolicy>();
             }});

}  // namespace umlab
