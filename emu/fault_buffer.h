// The GPU's replayable fault buffer: a bounded ring of raw fault entries.
//
// Duplicates are kept (several SMs faulting on one page give several
// entries, as on a GPU). When the ring is full a new entry is dropped and
// counted; the faulting accessor stays stalled and faults again after the
// next replay, as GPU warps do. Not thread-safe: the sim is single-threaded
// and the uffd backend guards it with its inbox lock.
#ifndef UMLAB_EMU_FAULT_BUFFER_H_
#define UMLAB_EMU_FAULT_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/fault.h"

namespace umlab {

class FaultBuffer {
 public:
  explicit FaultBuffer(size_t capacity);

  // False (and the entry is lost) when the buffer is full.
  bool Push(const FaultEntry& entry);
  // Moves up to out.size() oldest entries into `out`; returns how many.
  size_t Fetch(absl::Span<FaultEntry> out);
  // Discards every entry (UVM's flush before a replay).
  void Flush();

  size_t size() const { return size_; }
  size_t capacity() const { return ring_.size(); }
  bool empty() const { return size_ == 0; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::vector<FaultEntry> ring_;
  size_t head_ = 0;  // oldest entry
  size_t size_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_EMU_FAULT_BUFFER_H_
