#include "core/policy.h"

#include "absl/strings/cord.h"

namespace umlab {

std::optional<BlockNumber> Policy::ChooseVictim(const VictimQuery& query) {
  return context().memory().LeastRecentlyMigrated([](const BlockState&) { return true; },
                                                  query.for_block);
}

PolicyRegistry& Policies() {
  static PolicyRegistry* registry = new PolicyRegistry("policy");
  return *registry;
}

namespace {
constexpr char kRefusalPayload[] = "type.umlab/policy-refusal";
}  // namespace

absl::Status PolicyRefusal(absl::string_view message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kRefusalPayload, absl::Cord("1"));
  return status;
}

bool IsPolicyRefusal(const absl::Status& status) {
  return status.GetPayload(kRefusalPayload).has_value();
}

absl::Status PlanAhead(Policy& policy, EventSource& program, const DeviceConfig& device,
                       uint64_t capacity_bytes) {
  if (!policy.PlansAhead()) return absl::OkStatus();
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(program);
  if (!graph.ok()) return graph.status();
  return policy.Plan(PlanInput{*graph, device, capacity_bytes});
}

}  // namespace umlab
