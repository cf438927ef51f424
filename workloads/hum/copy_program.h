// The copy-then-kernel programs HUM is measured on (the DeepUM thesis,
// §7.1: Parboil, Rodinia and CUDA Samples; docs/hum.md): a CUDA program's
// cudaMalloc'd buffers, its malloc'd host buffers, its copies, kernels and
// host code, in the order its main() runs them.
//
// Setup holds what the benchmarks' own timers leave out and the thesis
// excluded too ("data initialization, result verification and file I/O"):
// allocations and filling the host buffers. The one iteration is the timed
// region, so a run's `per_iteration[0].time_ns` is what the thesis measured.
// Kernels take their roofline time under the device's ComputeSpec; host
// code takes the bytes it streams at one host thread's rate.
#ifndef UMLAB_WORKLOADS_HUM_COPY_PROGRAM_H_
#define UMLAB_WORKLOADS_HUM_COPY_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/param_map.h"
#include "workloads/tensor_program.h"
#include "workloads/workload.h"

namespace umlab {

// The generators' shorthands: access kinds, and a count parameter (every
// count's declared range starts at 1, so it is positive).
inline constexpr AccessType kRead = AccessType::kRead;
inline constexpr AccessType kWrite = AccessType::kWrite;
inline uint64_t CountParam(const ParamMap& params, const char* name) {
  return static_cast<uint64_t>(params.Int(name));
}

class CopyProgramBuilder {
 public:
  CopyProgramBuilder(std::string workload, const ComputeSpec& spec);

  // A cudaMalloc'd buffer, allocated in setup.
  int DeviceBuffer(const std::string& name, uint64_t bytes);
  // A malloc'd buffer, allocated in setup, where the program also fills it
  // from its input unless it only receives results (`filled` false).
  int HostBuffer(const std::string& name, uint64_t bytes, bool filled = true);

  // The timed region, in program order.
  void CopyIn(int device, int host, bool async = false);
  void CopyOut(int host, int device, bool async = false);
  void Sync() { build_.Sync(); }
  // A kernel of `flops` that moves `bytes` (-1: the sum of its accesses),
  // touching each access's range in turn.
  void Kernel(const std::string& name, double flops, std::vector<KernelAccess> accesses,
              double bytes = -1);
  // The same for a kernel whose thread blocks sweep its arrays together,
  // element by element (vectorAdd's C[i] = A[i] + B[i]): its whole-tensor
  // accesses are cut into as many slices as the largest spans 2 MB blocks,
  // and slice i of every array comes before slice i + 1 of any, so a
  // kernel needs the first block of each input, not the whole of the
  // first input, before it can go on.
  void Sweep(const std::string& name, double flops, const std::vector<KernelAccess>& accesses,
             double bytes = -1);
  // Host code on one thread that streams `bytes` through memory.
  void HostCode(const std::string& name, double bytes, std::vector<KernelAccess> accesses);
  // free() of a host buffer: its memory may be reused at once, which is a
  // write of it as far as a copy still reading it is concerned (HUM cannot
  // let a copy go on from freed memory, §4.3).
  void FreeHost(int host);

  // The program, or the generator's bug.
  absl::StatusOr<std::shared_ptr<const TensorProgram>> Finish();

 private:
  std::shared_ptr<TensorProgram> program_;
  TensorProgramBuilder build_;
};

// A copy program as a workload: its description says which benchmark it
// follows and where its numbers come from, then what running it measures.
class CopyWorkload final : public Workload {
 public:
  CopyWorkload(std::string summary, std::shared_ptr<const TensorProgram> program)
      : summary_(std::move(summary)), program_(std::move(program)) {}
  std::unique_ptr<EventSource> Open() const override { return OpenTensorProgram(program_); }
  std::string Describe() const override;

 private:
  std::string summary_;
  std::shared_ptr<const TensorProgram> program_;
};

// The workload of a builder's program (the builder's error if it failed).
absl::StatusOr<std::unique_ptr<Workload>> MakeCopyWorkload(std::string summary,
                                                           CopyProgramBuilder& build);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_HUM_COPY_PROGRAM_H_
