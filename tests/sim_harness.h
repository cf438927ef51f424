// Runs a hand-built program on the sim backend with every invariant checked
// after every engine step, for tests.
#ifndef UMLAB_TESTS_SIM_HARNESS_H_
#define UMLAB_TESTS_SIM_HARNESS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "backends/emu/sim_backend.h"
#include "core/engine.h"
#include "core/policy.h"
#include "core/registry.h"
#include "emu/device_presets.h"
#include "tests/program_builder.h"

namespace umlab::testing {

// A small, round-numbered device: 4 SMs, 1 GB/s both ways (2 MiB takes
// 2.097152 ms), no fixed costs, so times can be worked out by hand.
inline DeviceConfig TestDevice(int sms = 4) {
  DeviceConfig device = *DevicePreset("v100-pcie3");
  device.name = "test";
  device.compute.sm_count = sms;
  device.link = LinkConfig{1e9, 1e9, 0};
  device.fault_latency_ns = 0;
  return device;
}

struct SimRun {
  absl::Status status;
  RunStats stats;
};

// `observer`, if given, watches the engine (kernel and transfer times).
inline SimRun RunOnSim(const ProgramBuilder& program, uint64_t capacity_frames, Policy& policy,
                       const DeviceConfig& device = TestDevice(),
                       ReplayPolicy replay = ReplayPolicy::kBatch,
                       const SimOptions& options = SimOptions{},
                       EngineObserver* observer = nullptr) {
  const uint64_t frames = policy.UnlimitedCapacity() ? kUnlimitedFrames : capacity_frames;
  SimBackend backend(device, frames, options);
  EngineConfig config = EngineConfigFor(device);
  config.replay = replay;
  config.check_invariants = true;
  Engine engine(backend, policy, frames, config);
  if (observer != nullptr) engine.AddObserver(observer);
  SimRun run;
  VectorSource plan_source = program.Source();
  run.status = PlanAhead(policy, plan_source, device, capacity_frames * kBlockSize);
  if (!run.status.ok()) return run;
  VectorSource source = program.Source();
  run.status = backend.Run(source, engine, nullptr);
  if (run.status.ok()) run.status = engine.CheckInvariants();
  if (run.status.ok()) run.status = backend.CheckConsistency(engine);
  run.stats = engine.stats();
  return run;
}

// Four blocks read by one kernel (1 us of compute) on `device`, with room
// for all, under a policy that brings a whole block in on its first fault.
inline SimRun FourBlocksWholeOnFirstFault(const DeviceConfig& device,
                                          const SimOptions& options = SimOptions{}) {
  ProgramBuilder p;
  p.Alloc(0, 4);
  p.Kernel(1, 1000, {0, 1, 2, 3});
  absl::StatusOr<std::unique_ptr<Policy>> whole_blocks =
      Policies().Create("uvm-default:big_page_kb=2048,thrashing=false");
  if (!whole_blocks.ok()) return SimRun{whole_blocks.status(), {}};
  return RunOnSim(p, 8, **whole_blocks, device, ReplayPolicy::kBatch, options);
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_SIM_HARNESS_H_
