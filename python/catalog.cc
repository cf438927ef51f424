#include "python/catalog.h"

#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/param_map.h"
#include "core/policy.h"
#include "emu/device_presets.h"
#include "workloads/workload.h"

namespace umlab::python {

using cli::Json;
namespace {

Json ParamsJson(const std::vector<ParamInfo>& params) {
  Json out = Json::array();
  for (const ParamInfo& p : params) {
    Json param = {{"name", p.name},
                  {"type", ParamTypeName(p.type)},
                  {"default", p.default_value},
                  {"help", p.help}};
    if (p.range.bounded()) param["range"] = p.range.ToString();
    if (!p.choices.empty()) param["choices"] = p.choices;
    out.push_back(std::move(param));
  }
  return out;
}

Json EntryJson(const std::string& name, const std::string& description,
               const std::vector<ParamInfo>& params) {
  return Json{{"name", name}, {"description", description}, {"params", ParamsJson(params)}};
}

// Policies, workloads and backends: registry entries with their parameters.
template <typename Registry>
Json RegistryCatalog(const Registry& registry) {
  Json out = Json::array();
  for (const auto* entry : registry.Entries()) {
    out.push_back(EntryJson(entry->name, entry->description, entry->params));
  }
  return out;
}

}  // namespace

Json PolicyCatalog() { return RegistryCatalog(Policies()); }
Json WorkloadCatalog() { return RegistryCatalog(Workloads()); }
Json BackendCatalog() { return RegistryCatalog(Backends()); }

Json DeviceCatalog() {
  Json out = Json::array();
  for (const DevicePresetEntry* entry : DevicePresets().Entries()) {
    out.push_back(
        EntryJson(entry->name, entry->description, DeviceParams(*DevicePreset(entry->name))));
  }
  return out;
}

}  // namespace umlab::python
