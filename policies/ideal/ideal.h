// `ideal`: unlimited device memory, the upper bound. Pages still fault in on
// first touch, but nothing is ever evicted, so later iterations run at
// compute speed.
#ifndef UMLAB_POLICIES_IDEAL_IDEAL_H_
#define UMLAB_POLICIES_IDEAL_IDEAL_H_

#include "core/policy.h"

namespace umlab {

class IdealPolicy final : public Policy {
 public:
  bool UnlimitedCapacity() const override { return true; }
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_IDEAL_IDEAL_H_
