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

absl::Status PlanAhead(Policy& policy, EventSource& program, const DeviceConfig& device,
                       uint64_t capacity_bytes) {
  if (!policy.PlansAhead()) return absl::OkStatus();
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(program);
  if (!graph.ok()) return graph.status();
  return policy.Plan(PlanInput{*graph, device, capacity_bytes});
}

}  // namespace umlab
