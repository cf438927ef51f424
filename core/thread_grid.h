// A CUDA grid of thread blocks, and boxes of it: the unit SnuRHAC splits a
// kernel into (DeepUM thesis §6.2) and the unit a program's access
// descriptions speak of (core/grid_program.h).
#ifndef UMLAB_CORE_THREAD_GRID_H_
#define UMLAB_CORE_THREAD_GRID_H_

#include <cstdint>

namespace umlab {

// A grid's size, a thread block's size, or a position in either: CUDA's dim3.
struct Dim3 {
  uint32_t x = 1;
  uint32_t y = 1;
  uint32_t z = 1;

  uint64_t Volume() const { return uint64_t{x} * y * z; }
  bool operator==(const Dim3&) const = default;
};

// A box of a grid's thread blocks: first .. first + extent - 1 on each axis.
// One device's chunk of a split grid is one; so is a single block. An empty
// box has extent 0 along some axis.
struct GridShare {
  Dim3 first{0, 0, 0};
  Dim3 extent;

  bool empty() const { return extent.Volume() == 0; }
  bool operator==(const GridShare&) const = default;
};

}  // namespace umlab

#endif  // UMLAB_CORE_THREAD_GRID_H_
