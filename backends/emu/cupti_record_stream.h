// CUPTI's unified-memory records on their way to the run's engine, as the
// cuda backend receives them (the sim's `policy_from=user`).
//
// The driver's events become CUPTI records. CUPTI collects them from the
// driver every collect period and writes them into buffers of a fixed size;
// the cuda backend's flusher thread runs a flush every flush period, and a
// flush hands over only the buffers that are full (a forced one too, for
// unified-memory records on the H200; backends/cuda/cupti_fault_stream.cc
// asks for the buffers). So a record reaches the engine at
// the end of the first flush that starts after the collection that filled
// its buffer. Where the driver makes many records (fault-path copies come
// as one record per contiguous run of pages) a buffer fills within one
// collection; where it makes few (populates, which make one fault record per
// fault batch and no transfer record) a buffer takes hundreds of
// milliseconds to fill, and the engine hears that late: on the H200, the
// fault records of mobilenet's first iteration, before anything was
// written back, reached the engine 100-380 ms late (docs/fidelity.md).
//
// Each Record stands for `count` CUPTI records; the engine hears of it when
// the buffer holding the first of them is handed over. Records must be
// pushed in time order.
#ifndef UMLAB_BACKENDS_EMU_CUPTI_RECORD_STREAM_H_
#define UMLAB_BACKENDS_EMU_CUPTI_RECORD_STREAM_H_

#include <cstdint>
#include <deque>

#include "core/memory_units.h"
#include "core/page_mask.h"

namespace umlab {

// The defaults are the cuda backend's on the H200 (docs/cuda.md, runs 18
// and 19): transfer records reached the engine 5, 11 and 19 ms after the
// event at the 10th, 50th and 90th percentile, and a 16 ms collection plus
// the flusher's 1 ms pause and 2 ms flush gives 4.5, 11.5 and 19; its
// 64 KiB buffers hold 630 records of 104 bytes
// (CUpti_ActivityUnifiedMemoryCounter3).
struct CuptiRecordStreamConfig {
  // CUPTI collects the driver's records this often.
  Nanos collect_period_ns = 16000000;
  // The flusher: a flush of flush_cost_ns, then a pause of flush_pause_ns.
  Nanos flush_pause_ns = 1000000;
  Nanos flush_cost_ns = 2000000;
  // CUPTI records a buffer holds; 0 hands over every record at the first
  // flush after its collection, as if buffers were always full.
  uint64_t buffer_records = 630;
};

class CuptiRecordStream {
 public:
  struct Record {
    enum class Kind {
      kArrival,   // the driver brought `pages` of `block` in
      kEviction,  // the driver wrote `pages` of `block` back
      kOther,     // nothing the engine acts on (its own calls' records)
    };
    Nanos time;
    Kind kind;
    BlockNumber block;
    PageMask pages;
    uint64_t count = 1;  // the CUPTI records it stands for, at least 1
    // An arrival that a transfer record tells of (the driver copied data
    // in), as against a fault record: the first is news to the engine only
    // where BlockState::ExpectsNoNewsOfACopy says so.
    bool copied = false;
    // When the buffer holding its first CUPTI record was full (set by
    // CollectUntil).
    Nanos buffered = kNever;
  };

  // A record of `bytes` moved where CUPTI writes one record per
  // `bytes_per_record` on average: how many records that makes.
  static uint64_t RecordsFor(uint64_t bytes, uint64_t bytes_per_record);

  explicit CuptiRecordStream(const CuptiRecordStreamConfig& config) : config_(config) {}

  void Push(const Record& record);
  // Runs every collection at or before `now`.
  void CollectUntil(Nanos now);
  // The next instant at which a collection has records to take, or a flush
  // hands the front record over; kNever if neither.
  Nanos NextEventTime() const;
  // Whether a flush that starts at `flush_start` hands the front record
  // over (the final flush, kNever, hands everything over).
  bool FrontFlushable(Nanos flush_start) const;
  // When the flush that hands the front record over ends; kNever while its
  // buffer is not full (or nothing is left).
  Nanos FrontDeliveryTime() const;

  bool empty() const { return records_.empty(); }
  const Record& front() const { return records_.front(); }
  void PopFront();

 private:
  Nanos CollectionAt(Nanos time) const;

  CuptiRecordStreamConfig config_;
  std::deque<Record> records_;
  // Records before this index have been collected; those from
  // partial_begin_ on fill the buffer being written, `partial_fill_` CUPTI
  // records of it so far.
  size_t collected_ = 0;
  size_t partial_begin_ = 0;
  uint64_t partial_fill_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CUPTI_RECORD_STREAM_H_
