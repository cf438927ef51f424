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
  return true;
}

size_t FaultBuffer::Fetch(absl::Span<FaultEntry> out) {
  const size_t count = std::min(out.size(), size_);
  for (size_t i = 0; i < count; ++i) {
    out[i] = ring_[head_];
    if (++head_ == ring_.size()) head_ = 0;
  }
  size_ -= count;
  return count;
}

void FaultBuffer::Flush() {
  head_ = 0;
  size_ = 0;
}

}  // namespace umlab
