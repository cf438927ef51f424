#include "core/correlation_table.h"

#include <algorithm>
#include <utility>

namespace umlab {

CorrelationTable::CorrelationTable(const CorrelationShape& shape, TableSizing sizing)
    : max_rows_(shape.rows),
      assoc_(shape.assoc),
      succs_(static_cast<uint8_t>(std::clamp(shape.succs, 1, kMaxSuccs))),
      levels_(static_cast<uint8_t>(std::clamp(shape.levels, 1, kMaxLevels))) {
  if (sizing == TableSizing::kFixed) Resize(shape.rows);
}

uint64_t CorrelationTable::RowBytes(int rows, const CorrelationShape& shape) {
  const uint64_t ways = static_cast<uint64_t>(rows) * shape.assoc;
  return ways * sizeof(Way) + ways * shape.levels * shape.succs * sizeof(uint64_t);
}

uint64_t CorrelationTable::HeapBytes() const {
  return ways_.capacity() * sizeof(Way) + successors_.capacity() * sizeof(uint64_t);
}

void CorrelationTable::Resize(int rows) {
  const size_t list = static_cast<size_t>(levels_) * succs_;
  std::vector<Way> ways(static_cast<size_t>(rows) * assoc_);
  std::vector<uint64_t> successors(ways.size() * list);
  for (size_t old = 0; old < ways_.size(); ++old) {
    if (ways_[old].last_update == 0) continue;
    // `rows` is a multiple of rows_, so an old row's keys spread over rows
    // that hold no one else's: each finds an empty way.
    size_t way = static_cast<size_t>(ways_[old].tag % rows) * assoc_;
    while (ways[way].last_update != 0) ++way;
    ways[way] = ways_[old];
    std::copy_n(&successors_[old * list], list, &successors[way * list]);
  }
  ways_ = std::move(ways);
  successors_ = std::move(successors);
  rows_ = rows;
}

int CorrelationTable::FindWay(uint64_t key) const {
  if (rows_ == 0) return -1;
  const int base = static_cast<int>(key % rows_) * assoc_;
  for (int way = base; way < base + assoc_; ++way) {
    if (ways_[way].last_update != 0 && ways_[way].tag == key) return way;
  }
  return -1;
}

void CorrelationTable::Insert(uint64_t key, uint64_t successor, int level) {
  if (key == successor || level < 0 || level >= levels_) return;
  int way = FindWay(key);
  if (way < 0) way = WayForNewKey(key);
  Way& entry = ways_[way];
  entry.last_update = ++clock_;
  uint64_t* list = &successors_[ListIndex(way, level)];
  int count = entry.counts[level];
  int position = static_cast<int>(std::find(list, list + count, successor) - list);
  if (position == count) {
    // New successor: the least recent one falls off a full list.
    if (count < succs_) entry.counts[level] = static_cast<uint8_t>(++count);
    position = count - 1;
  }
  // MRU order: the successor moves to the front, the ones before it shift.
  std::copy_backward(list, list + position, list + position + 1);
  list[0] = successor;
}

int CorrelationTable::WayForNewKey(uint64_t key) {
  if (rows_ == 0) {
    // The smallest table that doubles exactly to NumRows: its odd part.
    int rows = max_rows_;
    while (rows % 2 == 0) rows /= 2;
    Resize(rows);
  }
  for (;;) {
    // The least recently updated way (an empty one first) gives its place,
    // successors and all.
    const int base = static_cast<int>(key % rows_) * assoc_;
    int way = base;
    for (int candidate = base; candidate < base + assoc_; ++candidate) {
      if (ways_[candidate].last_update < ways_[way].last_update) way = candidate;
    }
    // A full row below NumRows splits instead: a full table would not have
    // had the conflict, since its row for `key` holds a subset of these.
    if (ways_[way].last_update != 0 && rows_ < max_rows_) {
      Resize(rows_ * 2);
      continue;
    }
    ways_[way] = Way{key, 0, {}};
    return way;
  }
}

absl::Span<const uint64_t> CorrelationTable::Successors(uint64_t key, int level) const {
  const int way = level < 0 || level >= levels_ ? -1 : FindWay(key);
  if (way < 0) return {};
  return absl::MakeConstSpan(&successors_[ListIndex(way, level)],
                             static_cast<size_t>(ways_[way].counts[level]));
}

}  // namespace umlab
