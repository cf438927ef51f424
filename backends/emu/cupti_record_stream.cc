#include "backends/emu/cupti_record_stream.h"

#include <algorithm>

namespace umlab {
namespace {

// The first multiple of `period` at or after `time` (`time` if none).
Nanos NextMultiple(Nanos time, Nanos period) {
  return period == 0 ? time : (time + period - 1) / period * period;
}

}  // namespace

uint64_t CuptiRecordStream::RecordsFor(uint64_t bytes, uint64_t bytes_per_record) {
  return std::max<uint64_t>(1, (bytes + bytes_per_record / 2) / bytes_per_record);
}

void CuptiRecordStream::Push(const Record& record) {
  records_.push_back(record);
  records_.back().count = std::max<uint64_t>(1, record.count);
  records_.back().buffered = kNever;
}

Nanos CuptiRecordStream::CollectionAt(Nanos time) const {
  return NextMultiple(time, config_.collect_period_ns);
}

void CuptiRecordStream::CollectUntil(Nanos now) {
  while (collected_ < records_.size()) {
    const Nanos collection = CollectionAt(records_[collected_].time);
    if (collection > now) return;
    // This collection takes every record made by its instant.
    for (; collected_ < records_.size() && records_[collected_].time <= collection;
         ++collected_) {
      Record& record = records_[collected_];
      if (config_.buffer_records == 0) {
        record.buffered = collection;
        partial_begin_ = collected_ + 1;
        continue;
      }
      partial_fill_ += record.count;
      if (partial_fill_ < config_.buffer_records) continue;
      // The buffer that holds this record's first CUPTI record is full, and
      // with it those of every record before it; the rest of this record's
      // CUPTI records start the buffers after.
      for (size_t i = partial_begin_; i <= collected_; ++i) records_[i].buffered = collection;
      partial_begin_ = collected_ + 1;
      partial_fill_ %= config_.buffer_records;
    }
  }
}

Nanos CuptiRecordStream::NextEventTime() const {
  Nanos next = FrontDeliveryTime();
  if (collected_ < records_.size()) {
    next = std::min(next, CollectionAt(records_[collected_].time));
  }
  return next;
}

bool CuptiRecordStream::FrontFlushable(Nanos flush_start) const {
  if (records_.empty()) return false;
  if (flush_start == kNever) return true;
  const Nanos buffered = records_.front().buffered;
  return buffered != kNever && buffered <= flush_start;
}

Nanos CuptiRecordStream::FrontDeliveryTime() const {
  if (records_.empty() || records_.front().buffered == kNever) return kNever;
  // The flusher flushes, then pauses: flushes start every period, and a
  // buffer is handed over by the first flush that starts once it is full.
  const Nanos period = config_.flush_pause_ns + config_.flush_cost_ns;
  return NextMultiple(records_.front().buffered, period) + config_.flush_cost_ns;
}

void CuptiRecordStream::PopFront() {
  const bool was_buffered = records_.front().buffered != kNever;
  records_.pop_front();
  if (collected_ > 0) --collected_;
  if (partial_begin_ > 0) --partial_begin_;
  // The final flush takes records before their buffer was full; once it
  // has taken them all, the buffer being written is gone. (The tail of a
  // record whose buffer filled stays in the next one.)
  if (records_.empty() && !was_buffered) partial_fill_ = 0;
}

}  // namespace umlab
