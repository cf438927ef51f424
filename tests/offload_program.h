// A hand-built training iteration whose optimizer step runs on the host
// (the zoo's offload=true in miniature), for the tests of the policies
// that schedule around it (zero-offload, memferry).
#ifndef UMLAB_TESTS_OFFLOAD_PROGRAM_H_
#define UMLAB_TESTS_OFFLOAD_PROGRAM_H_

#include <cstdint>

#include "core/tensor_role.h"
#include "tests/program_builder.h"

namespace umlab::testing {

inline constexpr Nanos kOffloadUs = 1000;
// A block across the test device's 1 GB/s link (tests/sim_harness.h).
inline constexpr Nanos kBlockMove = 2097152;

inline uint8_t RoleCause(TensorRole role) { return static_cast<uint8_t>(role) + 1; }

// One iteration: kernel 1 (forward) reads the parameter (block 0) and
// kernel 2 (backward) writes its gradient (block 1); kernel 3 is 3 ms of
// other backward work; host kernel 4 (the CPU's step, 3 ms) reads the
// gradient and writes the parameter; kernel 5 is 3 ms of other work and
// kernel 6 (the next forward) reads the parameter.
inline ProgramBuilder OffloadedStep() {
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Activate(ProgramBuilder::BlockAddress(0), kBlockSize, RoleCause(TensorRole::kParameter));
  // The CPU initialises the parameter: the device's copies of it are
  // clean, and leave without a write-back when the step takes them.
  p.OnHost(100).Kernel(100, 10 * kOffloadUs, {0}, /*write=*/true);
  p.Iteration(0);
  p.Activate(ProgramBuilder::BlockAddress(1), kBlockSize, RoleCause(TensorRole::kGradient));
  p.Kernel(1, 10 * kOffloadUs, {0});
  p.Begin(2, 10 * kOffloadUs)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, false)
      .Access(ProgramBuilder::BlockAddress(1), kBlockSize, true)
      .End(2);
  p.Kernel(3, 3000 * kOffloadUs, {});
  p.OnHost(4)
      .Begin(4, 3000 * kOffloadUs)
      .Access(ProgramBuilder::BlockAddress(1), kBlockSize, false)
      .Access(ProgramBuilder::BlockAddress(0), kBlockSize, true)
      .End(4);
  p.Kernel(5, 3000 * kOffloadUs, {});
  p.Kernel(6, 10 * kOffloadUs, {0});
  p.Deactivate(ProgramBuilder::BlockAddress(1), kBlockSize);
  return p;
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_OFFLOAD_PROGRAM_H_
