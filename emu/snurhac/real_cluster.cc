#include "emu/snurhac/real_cluster.h"

#include <map>
#include <utility>

namespace umlab::snurhac {
namespace {

std::map<std::string, RealClusterRunner>& Runners() {
  static auto* runners = new std::map<std::string, RealClusterRunner>;
  return *runners;
}

}  // namespace

bool RegisterRealClusterRunner(const std::string& name, RealClusterRunner runner) {
  Runners()[name] = std::move(runner);
  return true;
}

const RealClusterRunner* FindRealClusterRunner(const std::string& name) {
  auto it = Runners().find(name);
  return it == Runners().end() ? nullptr : &it->second;
}

}  // namespace umlab::snurhac
