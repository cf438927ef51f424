// A pair-based correlation table (DeepUM thesis §5.2.1, after Solihin et
// al.'s correlation prefetching): for every key that missed, the keys that
// missed after it, most recent first, on NumLevels levels (level 0: the
// next miss; level 1: the one after that; ...), NumSuccs per level.
//
// The table has NumRows rows of Assoc ways; a key lives in row key mod
// NumRows, and a new key takes the way of its row updated least recently.
// DeepUM keeps one single-level table of UM blocks per execution id
// (policies/deepum); SnuRHAC one three-level table of pages per device
// (policies/snurhac_correlation). Keys are plain integers: block or page
// numbers.
#ifndef UMLAB_CORE_CORRELATION_TABLE_H_
#define UMLAB_CORE_CORRELATION_TABLE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace umlab {

// How a table's rows are allocated.
enum class TableSizing {
  // Rows double, from nothing up to NumRows, whenever a new key finds its
  // row full. A row only ever splits in two, so the table holds exactly
  // what a full NumRows table would, and predicts the same, on the memory
  // its misses need.
  kGrow,
  // All NumRows rows up front.
  kFixed,
};

struct CorrelationShape {
  int rows = 2048;  // NumRows
  int assoc = 2;    // Assoc
  int succs = 4;    // NumSuccs, at most kMaxSuccs
  int levels = 1;   // NumLevels, at most kMaxLevels
};

class CorrelationTable {
 public:
  static constexpr int kMaxLevels = 4;
  static constexpr int kMaxSuccs = 255;

  explicit CorrelationTable(const CorrelationShape& shape,
                            TableSizing sizing = TableSizing::kFixed);

  // `successor` missed `level` + 1 misses after `key`: it becomes the most
  // recent successor of `key` on that level. A missing `key` takes the
  // least recently updated way of its row. A key is never its own
  // successor.
  void Insert(uint64_t key, uint64_t successor, int level = 0);
  // Successors of `key` on `level`, most recent first; empty when it has no
  // way.
  absl::Span<const uint64_t> Successors(uint64_t key, int level = 0) const;
  // The row `key` maps to in a full NumRows table.
  int RowOf(uint64_t key) const { return static_cast<int>(key % max_rows_); }

  CorrelationShape shape() const { return {max_rows_, assoc_, succs_, levels_}; }
  // Rows allocated now (0 until the first insert under kGrow).
  int rows() const { return rows_; }
  int capacity() const { return rows_ * assoc_; }
  // Bytes the rows take on the heap now.
  uint64_t HeapBytes() const;
  // The heap bytes of `rows` rows of this shape.
  static uint64_t RowBytes(int rows, const CorrelationShape& shape);

 private:
  struct Way {
    uint64_t tag = 0;
    uint64_t last_update = 0;                  // 0: empty
    std::array<uint8_t, kMaxLevels> counts{};  // successors held per level
  };
  int FindWay(uint64_t key) const;
  // The way a new `key` takes: an empty one of its row, else (with the
  // table at NumRows) the least recently updated. Under kGrow a full row
  // doubles the table first.
  int WayForNewKey(uint64_t key);
  // Reallocates to `rows` rows (a multiple of the current count), moving
  // every way, with its successors and update time, to its new row.
  void Resize(int rows);
  size_t ListIndex(int way, int level) const {
    return (static_cast<size_t>(way) * levels_ + level) * succs_;
  }

  // The shape, kept small: DeepUM keeps a table per execution id.
  int max_rows_;
  int assoc_;
  uint8_t succs_;
  uint8_t levels_;
  int rows_ = 0;
  uint64_t clock_ = 0;
  std::vector<Way> ways_;             // rows x assoc
  std::vector<uint64_t> successors_;  // rows x assoc x levels x succs, MRU first
};

}  // namespace umlab

#endif  // UMLAB_CORE_CORRELATION_TABLE_H_
