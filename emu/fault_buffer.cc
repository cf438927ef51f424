#include "emu/fault_buffer.h"

#include <algorithm>

namespace umlab {

FaultBuffer::FaultBuffer(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {}

bool FaultBuffer::Push(const FaultEntry& entry) {
  if (size_ == ring_.size()) {
    ++dropped_;
    return false;
  }
  // A compare instead of a modulo: this is on every simulated fault.
  size_t tail = head_ + size_;
  if (tail >= ring_.size()) tail -= ring_.size();
  ring_[tail] = entry;
  ++size_;
  ++pushed_;
  return true;
}

size_t FaultBuffer::Fetch(absl::Span<FaultEntry> out) {
  const size_t count = std::min(out.size(), size_);
  for (size_t i = 0; i < count; ++i) {
    out[i] = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
  }
  size_ -= count;
  pushed_at_last_fetch_ = pushed_;
  last_fetch_count_ = count;
  fetched_pages_.clear();
  for (size_t i = 0; i < count; ++i) fetched_pages_.push_back(out[i].page);
  std::sort(fetched_pages_.begin(), fetched_pages_.end());
  last_fetch_duplicates_ =
      count - static_cast<size_t>(std::unique(fetched_pages_.begin(), fetched_pages_.end()) -
                                  fetched_pages_.begin());
  return count;
}

void FaultBuffer::Flush() {
  head_ = 0;
  size_ = 0;
}

void FaultBuffer::FlushToLastFetch() {
  // The entries still here that were pushed before the last fetch.
  const uint64_t oldest = pushed_ - size_;
  if (pushed_at_last_fetch_ <= oldest) return;
  const size_t stale = static_cast<size_t>(pushed_at_last_fetch_ - oldest);
  head_ = (head_ + stale) % ring_.size();
  size_ -= stale;
}

}  // namespace umlab
