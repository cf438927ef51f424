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

// What the runner needs to know about a backend before creating one.
struct BackendTraits {
  // Whether several runs may share the process at once. True only for a
  // backend whose runs touch nothing global: virtual time, no signal
  // handlers, no wall-clock throttle, no device. A real-time backend run
  // beside another would see its timing (and so its results) disturbed.
  bool parallel_runs = false;
  // Whether it models a storage tier behind the device (DeviceConfig's
  // link.storage); runs on a device with one are refused elsewhere.
  bool storage_tier = false;
};

// A factory gets the device model and the device capacity in 2 MB frames
// (kUnlimitedFrames for a policy with unlimited memory).
using BackendRegistry =
    BasicRegistry<Backend, BackendTraits, const DeviceConfig&, uint64_t>;

BackendRegistry& Backends();

}  // namespace umlab

#define UMLAB_REGISTER_BACKEND(id, ...)                               \
  [[maybe_unused]] static const bool umlab_backend_registered_##id = \
      ::umlab::Backends().Register(__VA_ARGS__)

#endif  // UMLAB_CORE_BACKEND_REGISTRY_H_
