// Runs a program on the uffd backend with every engine invariant checked,
// for the uffd tests.
#ifndef UMLAB_TESTS_UFFD_HARNESS_H_
#define UMLAB_TESTS_UFFD_HARNESS_H_

#include <dirent.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "backends/emu/uffd_backend.h"
#include "core/engine.h"
#include "core/event_source.h"
#include "core/policy.h"
#include "emu/device_presets.h"

namespace umlab::testing {

// Four SM threads, every word read checked, no modelled time: for tests
// that count traffic and check data rather than time.
inline UffdOptions VerifiedUffdOptions() {
  UffdOptions options;
  options.sms = 4;
  options.throttle = false;
  options.verify = true;
  options.watchdog_s = 60;
  return options;
}

struct UffdRun {
  absl::Status status;
  RunStats stats;
  UffdCounters counters;
};

inline UffdRun RunOnUffd(EventSource& program, uint64_t capacity_frames, Policy& policy,
                         const DeviceConfig& device, const UffdOptions& options) {
  UffdRun run;
  const uint64_t frames = policy.UnlimitedCapacity() ? kUnlimitedFrames : capacity_frames;
  absl::StatusOr<std::unique_ptr<UffdBackend>> backend =
      UffdBackend::Create(device, frames, options);
  if (!backend.ok()) {
    run.status = backend.status();
    return run;
  }
  EngineConfig config = EngineConfigFor(device);
  config.check_invariants = true;
  Engine engine(**backend, policy, frames, config);
  run.status = (*backend)->Run(program, engine, nullptr);
  if (run.status.ok()) run.status = engine.CheckInvariants();
  if (run.status.ok()) run.status = (*backend)->CheckConsistency(engine);
  run.stats = engine.stats();
  run.counters = (*backend)->counters();
  return run;
}

// Entries in a /proc/self directory (threads, descriptors).
inline int CountEntries(const char* path) {
  int count = 0;
  if (DIR* dir = opendir(path)) {
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
  }
  return count;
}

// Lines of /proc/self/maps that mention the device's memfds.
inline int CountDeviceMappings() {
  int count = 0;
  if (FILE* f = std::fopen("/proc/self/maps", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::string(line).find("umlab-uffd") != std::string::npos) ++count;
    }
    std::fclose(f);
  }
  return count;
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_UFFD_HARNESS_H_
