#include "core/backend_registry.h"

namespace umlab {

BackendRegistry& Backends() {
  static BackendRegistry* registry = new BackendRegistry("backend");
  return *registry;
}

}  // namespace umlab
