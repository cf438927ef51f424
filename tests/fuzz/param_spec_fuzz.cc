// Fuzzes `--policy=name:k=v,...` (and --workload, --backend) spec parsing:
// SplitSpec, the registry lookup and ParamMap::Resolve with every registered
// component's declared parameters (core/registry.h, core/param_map.h), without
// creating anything. Input: one byte choosing the registry, then the spec.
//
// An accepted spec must be readable: every declared parameter's typed read
// succeeds (ParamMap aborts on an undeclared name), and ToString() lists them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/param_map.h"
#include "core/policy.h"
#include "core/backend_registry.h"
#include "workloads/workload.h"

namespace {

template <typename Registry>
void Check(const Registry& registry, const std::string& spec) {
  auto resolved = registry.Resolve(spec);
  if (!resolved.ok()) return;
  const umlab::ParamMap& params = resolved->params;
  for (const umlab::ParamInfo& info : resolved->entry->params) {
    switch (info.type) {
      case umlab::ParamType::kInt: (void)params.Int(info.name); break;
      case umlab::ParamType::kDouble: (void)params.Double(info.name); break;
      case umlab::ParamType::kBool: (void)params.Bool(info.name); break;
      case umlab::ParamType::kBytes: (void)params.Bytes(info.name); break;
      case umlab::ParamType::kString: (void)params.String(info.name); break;
    }
  }
  (void)params.ToString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string spec(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: Check(umlab::Policies(), spec); break;
    case 1: Check(umlab::Workloads(), spec); break;
    case 2: Check(umlab::Backends(), spec); break;
  }
  return 0;
}
