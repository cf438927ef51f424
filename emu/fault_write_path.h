// The GPU's path from a faulting warp to the replayable fault buffer.
//
// On the H200 the GPU writes fault entries one at a time, about 20 ns apart
// in a burst, and in no particular order of address: of the entries the
// cuda backend's replay kernel raised (its warps take pages in order from
// one cursor), 57% follow an entry of a lower page, where 100% would be
// page order and 50% none (bench/fault_batch_shapes.py on the migration logs
// of mlp and bert-base, docs/fidelity.md "The fault buffer's order"). So
// the driver, fetching 256 entries at a time, finds each batch spread over
// the two or three blocks the warps are faulting on.
//
// Raised entries wait here; one is written every `write_ns`, picked
// pseudo-randomly among those waiting (a fixed seed: runs stay identical).
// An issuer has one fault outstanding: one that faults again (a replay
// found its page still missing) before its entry was written replaces it,
// so what waits is bounded by the issuers, however often replays come.
// With write_ns 0 every entry is written at once, in the order raised.
#ifndef UMLAB_EMU_FAULT_WRITE_PATH_H_
#define UMLAB_EMU_FAULT_WRITE_PATH_H_

#include <cstdint>
#include <vector>

#include "core/fault.h"
#include "core/memory_units.h"
#include "emu/fault_buffer.h"

namespace umlab {

class FaultWritePath {
 public:
  explicit FaultWritePath(Nanos write_ns) : write_ns_(write_ns) {}

  // A warp faulted at `now`: its entry is written once its turn comes.
  // False when it was written at once into a full buffer, and lost (a
  // later write's loss is counted by the buffer alone).
  bool Raise(const FaultEntry& entry, Nanos now, FaultBuffer& buffer);
  // Writes into `buffer` every entry whose turn has come by `now`.
  void WriteUntil(Nanos now, FaultBuffer& buffer);
  // When the next entry will be written; kNever when none waits.
  Nanos NextWriteTime() const;
  bool empty() const { return waiting_.empty(); }

 private:
  void WriteOne(FaultBuffer& buffer);

  Nanos write_ns_;
  std::vector<FaultEntry> waiting_;
  // Where each issuer's waiting entry is in `waiting_` (kNone: none).
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> waiting_of_issuer_;
  // When the path can write again: the last write's time plus write_ns.
  Nanos free_at_ = 0;
  uint64_t random_state_ = 0x9e3779b97f4a7c15ull;
};

}  // namespace umlab

#endif  // UMLAB_EMU_FAULT_WRITE_PATH_H_
