// Turns what a real process was seen doing into a umlab program: the
// allocator's segments (kAlloc, kFree) and blocks (kActivate, kDeactivate),
// iteration marks, and every kernel launch with its execution id, name,
// argument words and measured duration. The trace it writes replays on the
// sim with any policy, like a generator's program (docs/torch.md,
// "Recording a real training").
//
// A kernel's access set is not visible from the host. It is inferred from
// the launch's arguments: every 8-byte-aligned argument word that points
// into a live allocator block makes the kernel touch that whole block (the
// tensor's storage). Pointers nested in structs (TensorIterator's offset
// calculators, the foreach kernels' tensor lists) are found the same way,
// since every word of the argument buffer is scanned. What this misses: a
// kernel that reaches memory through a pointer stored in device memory, and
// views smaller than their block (the whole block is counted).
//
// Reads and writes are not distinguishable either. The rule: the first
// kernel to touch a block after it was handed out writes it (a kernel does
// not read garbage); later kernels read it, except PyTorch's foreach
// kernels (multi_tensor_apply: the optimizer step), which write what they
// touch. In-place updates outside the optimizer (ReLU(inplace=True), `+=`
// residuals, gradient accumulation) are recorded as reads.
//
// Not thread-safe: the caller serialises the On* calls in the process's
// program order.
#ifndef UMLAB_CORE_PROGRAM_RECORDER_H_
#define UMLAB_CORE_PROGRAM_RECORDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/event.h"

namespace umlab {

struct RecordingStats {
  uint64_t launches = 0;
  uint64_t accesses = 0;          // (launch, block) pairs recorded
  uint64_t written_blocks = 0;    // of those, recorded as writes
  uint64_t pointer_words = 0;     // argument words inside a live segment
  uint64_t block_words = 0;       // ... of which inside a live block
  uint64_t segment_words = 0;     // ... inside a segment but no known block:
                                  // the kernel is taken to touch the segment
  uint64_t launches_without_access = 0;
  uint64_t foreign_blocks = 0;    // block events outside every recorded segment, ignored
  uint64_t timed_launches = 0;    // with a measured duration
};

// How completely recorded access sets explain faults observed in the same
// run: each fault (address, launch) counts as explained when the address
// lies in one of that launch's recorded blocks.
struct AccessCoverage {
  uint64_t faults = 0;
  uint64_t explained = 0;
  uint64_t outside_any_kernel = 0;  // no launch was running
};

class ProgramRecorder {
 public:
  ProgramRecorder() = default;

  void OnSegment(bool allocated, uint64_t address, uint64_t bytes);
  // A block handed out (`live`) or back in the allocator's cache.
  void OnBlock(bool live, uint64_t address, uint64_t bytes);
  void OnIteration();
  // One launch, in launch order; returns its index (0-based).
  uint64_t OnLaunch(uint32_t execution_id, absl::string_view name,
                    absl::Span<const uint64_t> argument_words);
  // The measured duration of launch `index`; launches never timed keep 0.
  void SetDuration(uint64_t index, Nanos duration);

  // The program so far: events in program order.
  const std::vector<Event>& events() const { return events_; }
  const RecordingStats& stats() const { return stats_; }
  uint64_t launches() const { return launch_begin_.size(); }

  // `faults` pairs an address with the index of the launch running then.
  AccessCoverage Coverage(absl::Span<const std::pair<uint64_t, uint64_t>> faults) const;

  // Writes the program as a .umt trace with `metadata`.
  absl::Status Write(const std::string& path,
                     std::vector<std::pair<std::string, std::string>> metadata) const;

 private:
  // A live segment or block: [start, end), start being its key.
  struct Range {
    uint64_t end = 0;
    bool touched = false;  // blocks: a kernel has touched it since it was handed out
  };
  // The entry of `ranges` that holds `address`, or end().
  static std::map<uint64_t, Range>::iterator Holding(std::map<uint64_t, Range>& ranges,
                                                     uint64_t address);

  std::vector<Event> events_;
  std::map<uint64_t, Range> segments_;
  std::map<uint64_t, Range> blocks_;
  absl::flat_hash_set<uint32_t> defined_;
  std::vector<size_t> launch_begin_;       // index of each launch's kKernelBegin
  // Each launch's recorded blocks, [start, end), for Coverage().
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> launch_blocks_;
  uint64_t iterations_ = 0;
  RecordingStats stats_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_PROGRAM_RECORDER_H_
