// The GPU's replayable fault buffer: a bounded ring of raw fault entries.
//
// Duplicates are kept (several SMs faulting on one page give several
// entries, as on a GPU). When the ring is full a new entry is dropped and
// counted; the faulting accessor stays stalled and faults again after the
// next replay, as GPU warps do. Not thread-safe: the sim is single-threaded
// and the uffd backend guards it with its inbox lock.
//
// The UVM driver flushes the buffer before each batch's replay in one of two
// ways (uvm_gpu_replayable_faults.c, BATCH_FLUSH): up to the PUT pointer it
// read when it fetched the batch (CACHED_PUT, FlushToLastFetch), which keeps
// the entries raised while the batch was serviced for the next batch; or up
// to PUT as it is now (UPDATE_PUT, Flush), when more than a set share of the
// batch's entries were duplicates.
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
  // Remembers where the buffer ended (the driver reads PUT when it fetches)
  // and how many of the entries fetched repeat a page fetched with them.
  size_t Fetch(absl::Span<FaultEntry> out);
  // Discards every entry (the flush with UPDATE_PUT).
  void Flush();
  // Discards the entries that were in the buffer at the last Fetch and were
  // left there (past the batch size); those raised since stay (the flush
  // with CACHED_PUT).
  void FlushToLastFetch();

  // Of the entries the last Fetch took, how many were on a page an earlier
  // one of them was on (the driver's num_duplicate_faults).
  size_t last_fetch_duplicates() const { return last_fetch_duplicates_; }
  size_t last_fetch_count() const { return last_fetch_count_; }

  size_t size() const { return size_; }
  size_t capacity() const { return ring_.size(); }
  bool empty() const { return size_ == 0; }
  uint64_t dropped() const { return dropped_; }

 private:
  std::vector<FaultEntry> ring_;
  size_t head_ = 0;  // oldest entry
  size_t size_ = 0;
  uint64_t dropped_ = 0;
  // Entries ever accepted, and how many had been when Fetch last read the
  // end of the buffer: the entries before that mark are the cached PUT's.
  uint64_t pushed_ = 0;
  uint64_t pushed_at_last_fetch_ = 0;
  size_t last_fetch_count_ = 0;
  size_t last_fetch_duplicates_ = 0;
  std::vector<PageNumber> fetched_pages_;  // scratch for the duplicate count
};

}  // namespace umlab

#endif  // UMLAB_EMU_FAULT_BUFFER_H_
