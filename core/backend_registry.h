// Backends by name: `--backend=sim`, `--backend=uffd:dilation=4`. Each
// backend registers itself from its own source file, so adding one means
// adding its folder's files and nothing else.
#ifndef UMLAB_CORE_BACKEND_REGISTRY_H_
#define UMLAB_CORE_BACKEND_REGISTRY_H_

#include <cstdint>

#include "core/backend.h"
#include "core/registry.h"
#include "core/device_config.h"

namespace umlab {

// A factory gets the device model and the device capacity in 2 MB frames
// (kUnlimitedFrames for a policy with unlimited memory).
using BackendRegistry = Registry<Backend, const DeviceConfig&, uint64_t>;

BackendRegistry& Backends();

}  // namespace umlab

#define UMLAB_REGISTER_BACKEND(id, ...)                               \
  [[maybe_unused]] static const bool umlab_backend_registered_##id = \
      ::umlab::Backends().Register(__VA_ARGS__)

#endif  // UMLAB_CORE_BACKEND_REGISTRY_H_
