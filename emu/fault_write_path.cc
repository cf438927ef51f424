#include "emu/fault_write_path.h"

#include <algorithm>
#include <utility>

#include "core/split_mix64.h"

namespace umlab {

bool FaultWritePath::Raise(const FaultEntry& entry, Nanos now, FaultBuffer& buffer) {
  if (write_ns_ == 0) return buffer.Push(entry);
  // An idle path writes at once; a busy one when its turn comes.
  if (waiting_.empty()) free_at_ = std::max(free_at_, now);
  if (entry.sm >= waiting_of_issuer_.size()) waiting_of_issuer_.resize(entry.sm + 1, kNone);
  uint32_t& waiting = waiting_of_issuer_[entry.sm];
  if (waiting != kNone) {
    waiting_[waiting] = entry;
  } else {
    waiting = static_cast<uint32_t>(waiting_.size());
    waiting_.push_back(entry);
  }
  WriteUntil(now, buffer);
  return true;
}

void FaultWritePath::WriteUntil(Nanos now, FaultBuffer& buffer) {
  while (!waiting_.empty() && free_at_ <= now) {
    WriteOne(buffer);
    free_at_ += write_ns_;
  }
}

Nanos FaultWritePath::NextWriteTime() const { return waiting_.empty() ? kNever : free_at_; }

void FaultWritePath::WriteOne(FaultBuffer& buffer) {
  const size_t pick = static_cast<size_t>(SplitMix64(random_state_) % waiting_.size());
  std::swap(waiting_[pick], waiting_.back());
  waiting_of_issuer_[waiting_[pick].sm] = static_cast<uint32_t>(pick);
  waiting_of_issuer_[waiting_.back().sm] = kNone;
  buffer.Push(waiting_.back());  // a full buffer drops it, as the GPU does
  waiting_.pop_back();
}

}  // namespace umlab
