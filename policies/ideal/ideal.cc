#include "policies/ideal/ideal.h"

#include <memory>

namespace umlab {

UMLAB_REGISTER_POLICY(
    ideal, {"ideal", "unlimited device memory: the upper bound (capacity is ignored)",
            {},
            [](const ParamMap&) -> absl::StatusOr<std::unique_ptr<Policy>> {
              return std::make_unique<IdealPolicy>();
            }});

}  // namespace umlab
