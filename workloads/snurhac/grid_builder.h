// The preamble every SnuRHAC benchmark generator shares: a program with a
// name, its arrays laid out one after another (GridArrayLayout), and its
// launches in order. Each generator used to spell this out itself.
#ifndef UMLAB_WORKLOADS_SNURHAC_GRID_BUILDER_H_
#define UMLAB_WORKLOADS_SNURHAC_GRID_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/grid_program.h"

namespace umlab::grid {

class GridProgramBuilder {
 public:
  explicit GridProgramBuilder(std::string name)
      : program_(std::make_unique<GridProgram>()), layout_(*program_) {
    program_->name = std::move(name);
  }

  // A cudaMalloc'd array; returns its index for the accesses.
  int Array(std::string name, uint64_t bytes, bool copied_in, bool copied_out) {
    return layout_.Add(std::move(name), bytes, copied_in, copied_out);
  }
  const GridArray& array(int index) const { return program_->arrays[index]; }
  GridArray& mutable_array(int index) { return program_->arrays[index]; }
  // The program so far, for helpers that read its arrays' places.
  const GridProgram& program() const { return *program_; }

  // Appends a launch of `name` (distinct `exec_id` per kernel and
  // arguments) over `grid` blocks of `threads` threads.
  void Launch(std::string name, uint32_t exec_id, Dim3 grid, Dim3 threads, Nanos compute_ns,
              std::vector<GridAccess> accesses) {
    program_->launches.push_back(
        GridKernel{std::move(name), exec_id, grid, threads, compute_ns, std::move(accesses)});
  }

  std::unique_ptr<GridProgram> Finish() { return std::move(program_); }

 private:
  std::unique_ptr<GridProgram> program_;
  GridArrayLayout layout_;
};

// A one-dimensional launch of `blocks` blocks of `threads` threads.
inline Dim3 Blocks(uint64_t blocks) { return Dim3{static_cast<uint32_t>(blocks), 1, 1}; }
inline Dim3 Blocks(uint64_t x, uint64_t y) {
  return Dim3{static_cast<uint32_t>(x), static_cast<uint32_t>(y), 1};
}

// Blocks of `block` threads that cover `elements`, the last one partial.
inline uint64_t BlocksFor(uint64_t elements, uint64_t block) {
  return (elements + block - 1) / block;
}

}  // namespace umlab::grid

#endif  // UMLAB_WORKLOADS_SNURHAC_GRID_BUILDER_H_
