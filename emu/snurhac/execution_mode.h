// SnuRHAC's rule for running a kernel on one device instead of all of them
// (DeepUM thesis §6.4, "Avoiding multiple GPUs"; the threshold is §7.3.1's):
//
//  - a kernel with atomic operations on global memory runs on one device;
//  - so does a kernel whose devices would write the same bytes too much:
//    write-shared pages migrate back and forth at every write fault. The
//    runtime computes each device's write ranges (from the grid split and
//    the kernel's statically analysed write accesses), then "the ratio of
//    the overlapping amount to the total amount of access ranges"; above
//    the threshold, one device runs the kernel.
//
// The figure that defines the overlap (Figure 6.4) is lost from the text we
// have, so the ratio is read as: the bytes that two or more devices write,
// over the bytes that any device writes (the union, so that the ratio lies
// in [0, 1] and is 1 when every device writes the same range, whatever the
// device count; summing the devices' range lengths instead would give 1/N
// there and never trip a 0.5 threshold beyond two devices). A device's own
// ranges overlapping each other is not sharing. "Exceeds" is strict: a
// ratio of exactly 0.5 keeps all devices.
#ifndef UMLAB_EMU_SNURHAC_EXECUTION_MODE_H_
#define UMLAB_EMU_SNURHAC_EXECUTION_MODE_H_

#include <cstdint>
#include <vector>

#include "core/byte_range.h"

namespace umlab::snurhac {

// §7.3.1: "The threshold value for checking overlapping access ranges ...
// is set to 0.5", which sent correlation, covariance and myocyte to one GPU.
inline constexpr double kWriteOverlapThreshold = 0.5;

// What a kernel's launch knows about how its devices would share memory.
struct LaunchSharing {
  bool uses_atomics = false;
  // Per device, the ranges its share of the grid writes.
  std::vector<std::vector<ByteRange>> write_ranges;
};

enum class ExecutionMode { kAllDevices, kSingleDevice };

// Bytes written by two or more devices over bytes written by any; 0 when
// nothing is written.
double WriteOverlapRatio(const std::vector<std::vector<ByteRange>>& write_ranges);

ExecutionMode ChooseExecutionMode(const LaunchSharing& sharing,
                                  double threshold = kWriteOverlapThreshold);

}  // namespace umlab::snurhac

#endif  // UMLAB_EMU_SNURHAC_EXECUTION_MODE_H_
