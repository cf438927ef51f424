// What the engine tells an observer while it runs, with the backend's time:
// the program's kernels and iterations, each fault batch, each transfer as
// it is issued and as it lands, and every drop and device eviction. The
// recorders that turn a run into pictures (core/run_series.h) and into a
// timeline (core/timeline_recorder.h) are observers; the engine's decisions
// do not depend on them, and a run without one pays one empty-vector check
// per step.
#ifndef UMLAB_CORE_ENGINE_OBSERVER_H_
#define UMLAB_CORE_ENGINE_OBSERVER_H_

#include <cstdint>
#include <string>

#include "core/memory_units.h"
#include "core/transfer.h"

namespace umlab {

class Engine;

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;

  virtual void OnIterationBegin(uint64_t /*index*/, Nanos /*now*/) {}
  virtual void OnKernelDefined(uint32_t /*exec_id*/, const std::string& /*name*/) {}
  virtual void OnKernelBegin(uint32_t /*exec_id*/, Nanos /*now*/) {}
  virtual void OnKernelEnd(uint32_t /*exec_id*/, Nanos /*now*/) {}
  // A batch of `faults` raw entries (`faulted_pages` distinct pages) began
  // service at `start`; it is done (accessors replayed) at OnFaultBatchDone.
  virtual void OnFaultBatch(Nanos /*start*/, uint64_t /*faults*/, uint64_t /*faulted_pages*/) {}
  virtual void OnFaultBatchDone(Nanos /*now*/) {}
  // A migration or eviction handed to the backend, and its completion.
  virtual void OnTransferIssued(const Transfer& /*transfer*/, Nanos /*now*/) {}
  virtual void OnTransferCompleted(const Transfer& /*transfer*/, Nanos /*now*/) {}
  // Bytes dropped without write-back (policy invalidation, a freed segment).
  virtual void OnInvalidated(BlockNumber /*block*/, uint64_t /*bytes*/, Nanos /*now*/) {}
  // The device evicted pages by itself (Engine::OnDeviceEvicted).
  virtual void OnDeviceEvicted(BlockNumber /*block*/, uint64_t /*bytes*/, Nanos /*now*/) {}
  // After every engine step (a program event, a fault service, a transfer
  // landing): the state may have changed. `engine` is the one observed.
  virtual void OnStep(const Engine& /*engine*/, Nanos /*now*/) {}
  // The run is over (Engine::Finish), at `now`.
  virtual void OnFinish(const Engine& /*engine*/, Nanos /*now*/) {}
};

}  // namespace umlab

#endif  // UMLAB_CORE_ENGINE_OBSERVER_H_
