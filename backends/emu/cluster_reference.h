// What every word of a grid program's memory must hold on the uffd cluster
// (backends/emu/uffd_cluster.h): the sequential reference execution the
// processes' reads and the final memory are checked against.
//
// Memory is checked in 4-byte words (word w is bytes [4w, 4w + 4) of the
// unified range). Kernel k stores WordValue(k, w) into every word its grid
// writes; the host copies WordValue(kCopiedIn, w) into the arrays it copies
// in; every other word holds zero (it never held data). The reference runs
// each kernel's whole grid, one kernel after another, so the split, the
// single-device rule and the protocol play no part in it.
//
// During kernel k, a read of word w must see the value from before the
// kernel if the kernel does not write w (no blank page, no stale copy from
// an earlier kernel), and that value or WordValue(k, w) if it does (CUDA
// lets a grid's other blocks see its writes late; the thesis relies on it).
#ifndef UMLAB_BACKENDS_EMU_CLUSTER_REFERENCE_H_
#define UMLAB_BACKENDS_EMU_CLUSTER_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "core/byte_range.h"
#include "core/grid_program.h"

namespace umlab {

inline constexpr uint64_t kWordBytes = 4;
// The "kernel" of the host's copy-in.
inline constexpr int kCopiedIn = -1;

// Never zero, so that a blank page is told from any written value.
uint32_t WordValue(int kernel, uint64_t word);

// The words a byte range covers (ranges are element-aligned; a partial word
// counts).
inline uint64_t FirstWord(const ByteRange& range) { return range.begin / kWordBytes; }
inline uint64_t EndWord(const ByteRange& range) {
  return (range.end + kWordBytes - 1) / kWordBytes;
}

class ClusterReference {
 public:
  // Memory before the first kernel: the arrays copied in hold their values.
  explicit ClusterReference(const GridProgram& program);

  uint64_t words() const { return last_writer_.size(); }
  // Word w before the current kernel.
  uint32_t Expected(uint64_t word) const;
  // Kernel `index` of the program (its whole grid) writes this word.
  bool WrittenByCurrent(uint64_t word) const { return written_[word]; }
  // Whether `seen`, read from `word` during the current kernel, is allowed.
  bool ReadAllowed(uint64_t word, uint32_t seen) const;

  // Enters kernel `index` (the next one, in launch order): computes what its
  // whole grid writes.
  void BeginKernel(int index);
  // Leaves it: its writes become the memory's values.
  void EndKernel();

 private:
  const GridProgram& program_;
  int current_ = kCopiedIn;
  // Per word: the kernel that last wrote it, kCopiedIn, or kNoData.
  std::vector<int32_t> last_writer_;
  std::vector<bool> written_;  // by the current kernel
  // The byte ranges the current kernel's whole grid writes: a kernel's end
  // and the next one's start walk these, not every word of the range (a
  // program's arrays may lie far apart, and every device process keeps a
  // reference).
  std::vector<ByteRange> written_ranges_;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_CLUSTER_REFERENCE_H_
