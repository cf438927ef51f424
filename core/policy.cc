#include "core/policy.h"

namespace umlab {

std::optional<BlockNumber> Policy::ChooseVictim(const VictimQuery& query) {
  return context().memory().LeastRecentlyMigrated([](const BlockState&) { return true; },
                                                  query.for_block);
}

PolicyRegistry& Policies() {
  static PolicyRegistry* registry = new PolicyRegistry("policy");
  return *registry;
}

}  // namespace umlab
