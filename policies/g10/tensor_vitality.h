// G10's tensor vitality analysis (MICRO '23, §4.2) over one iteration of a
// program: when each tensor is alive, and the periods in which it is alive
// but unused (G10's "hiding intervals"), with their lengths in ideal kernel
// time. It follows the artifact (src/analysis.cc:
// tensor_first_pass_liveness_analysis, tensor_second_pass_interval_formation,
// get_interval_time):
//   - an intermediate is born at its first use and dies after its last read
//     (never read: it dies right after its birth); its inactive periods lie
//     between consecutive uses in that span;
//   - a global (weights, optimizer state) is always alive, and the program
//     repeats, so its periods run between consecutive uses cyclically: the
//     one from its last use to its first wraps into the next iteration
//     ("looped");
//   - lengths come from the kernels' ideal (compute) times.
#ifndef UMLAB_POLICIES_G10_TENSOR_VITALITY_H_
#define UMLAB_POLICIES_G10_TENSOR_VITALITY_H_

#include <cstdint>
#include <vector>

#include "core/program_graph.h"

namespace umlab {

struct TensorLife {
  uint64_t address = 0;
  uint64_t size = 0;   // as the program gives it
  uint64_t bytes = 0;  // the whole pages it spans: what it takes on the device
  bool global = false;
  bool used = false;   // some kernel of the iteration reads or writes it
  int birth = -1;      // intermediates: first kernel that uses it
  int death = -1;      // intermediates: last kernel that reads it, plus one; -1 if none
};

// A period in which a tensor is alive but no kernel uses it.
struct InactivePeriod {
  uint32_t tensor = 0;
  int start = 0;        // the first kernel that does not use it
  int end = 0;          // the kernel that uses it next
  bool looped = false;  // start > end: it runs past the iteration's end
  double time_us = 0;   // ideal time from the start of `start` to that of `end`
};

class TensorVitality {
 public:
  explicit TensorVitality(const IterationGraph& iteration);

  int kernels() const { return kernels_; }
  const std::vector<TensorLife>& tensors() const { return tensors_; }
  const std::vector<InactivePeriod>& periods() const { return periods_; }
  bool Uses(int kernel, uint32_t tensor) const;

  // When kernel `k` starts in the ideal schedule, in microseconds, for k in
  // [0, 2 * kernels()]: past kernels() the next iteration repeats this one.
  double StartUs(int k) const { return start_us_[static_cast<size_t>(k)]; }
  // Kernel k's ideal time (k taken modulo kernels()).
  double DurationUs(int k) const;
  // The kernel j in [from, to) during which time t falls (StartUs(j) <= t <
  // StartUs(j + 1)), or -1. Indices run into the next iteration as above.
  int KernelAt(double t_us, int from, int to) const;

 private:
  int kernels_ = 0;
  std::vector<TensorLife> tensors_;
  std::vector<InactivePeriod> periods_;
  std::vector<double> duration_us_;            // per kernel
  std::vector<double> start_us_;               // 2 * kernels + 1 entries
  std::vector<std::vector<uint32_t>> uses_;    // per kernel, ascending
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_TENSOR_VITALITY_H_
