// A training program as a one-iteration template of tensors, kernels and
// steps, and the stream that interprets it kernel by kernel.
//
// Every generator in workloads/ (mlp, the DNN zoo, the HPC patterns) builds a
// TensorProgram once, at workload creation, and each Open() interprets it:
// setup steps once, then the iteration steps `iterations` times. Tensors are
// allocated through the caching-allocator model, so the stream carries the
// kAlloc/kFree/kActivate/kDeactivate events PyTorch would produce. The
// template is small (one entry per kernel and tensor of one iteration), and
// the stream holds only the events of the kernel being emitted, so memory
// stays bounded whatever the model size or the number of iterations.
//
// Most accesses are static: a whole tensor, or a fixed byte range of it (a
// stencil tile, a GEMM tile). Irregular accesses are drawn while streaming
// from a seeded generator (a Gather): the rows of an embedding lookup, the
// nodes of a pointer chase. The same gather id draws the same rows within an
// iteration (so an embedding's backward scatters to the rows its forward
// read) and different rows in the next one (a new batch), deterministically.
//
// Execution ids: kernel k of the template has id k + 1. Kernels are
// registered by name in order of first launch, and a name encodes the layer
// and the shapes, so the same launch gets the same id every iteration, like
// DeepUM's hash of the kernel name and arguments.
#ifndef UMLAB_WORKLOADS_TENSOR_PROGRAM_H_
#define UMLAB_WORKLOADS_TENSOR_PROGRAM_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "core/compute_spec.h"
#include "core/copy_command.h"
#include "core/event.h"
#include "core/event_source.h"
#include "core/tensor_role.h"

namespace umlab {


struct TensorSpec {
  std::string name;  // for error messages, e.g. "h3.attn.c_attn.weight.grad"
  uint64_t bytes = 0;
  TensorRole role = TensorRole::kActivation;
  // A host buffer (malloc's), outside the managed space: the interpreter
  // gives it an address in a host range of its own, and the allocator
  // never sees it. Only host kernels and copies touch it.
  bool on_host = false;
};

// A copy of a device tensor's bytes from or to a host tensor (kCopy).
struct CopySpec {
  int device = 0;
  int host = 0;
  CopyDirection direction = CopyDirection::kHostToDevice;
  bool async = false;
};

// How a Gather draws its items.
enum class GatherKind : uint8_t {
  kPowerLaw,  // item ranks from a power law (Zipf-like), scattered over the table
  kUniform,   // uniformly random items
  kChase,     // a pointer chase: each item is the successor of the last one
};

// An irregular access: `draws` items of `item_bytes` each out of `items`,
// drawn per iteration. Each distinct item is accessed once, in first-touch
// order; consecutive items merge into one access.
struct GatherSpec {
  GatherKind kind = GatherKind::kUniform;
  uint64_t items = 0;
  uint64_t item_bytes = 0;
  uint64_t draws = 0;
  double exponent = 1.05;  // kPowerLaw: P(rank r) ~ r^-exponent
  uint64_t seed = 0;
};

struct KernelAccess {
  int tensor = 0;
  AccessType access = AccessType::kRead;
  uint64_t offset = 0;  // bytes into the tensor
  uint64_t size = 0;    // 0: to the end of the tensor
  int gather = -1;      // >= 0: the items of that gather instead of the range
  uint32_t rereads = 0; // further passes over the range (Event::rereads)
};

// A GEMM's read of its weight, with the passes a tiled GEMM makes over it:
// one per 256 rows of the other operand (`rows`: its M). Measured with
// cuBLAS's half GEMMs on an H100 with the weight in host memory
// (umlab_remote_probe, docs/devices.md "Remote access"): 16.3 and 65 passes
// at 4096 and 16384 rows of a 768 x 3072 weight, 16.1 at 4096 rows of a
// 4096 x 4096 one.
KernelAccess GemmWeightRead(int weight, uint64_t rows);

struct KernelSpec {
  std::string name;  // encodes layer and shapes, so it identifies the launch
  Nanos duration_ns = 0;
  std::vector<KernelAccess> accesses;
  KernelPlace place = KernelPlace::kDevice;
};

struct ProgramStep {
  enum class Kind : uint8_t { kIterationBegin, kAllocate, kRelease, kLaunch, kCopy, kSync };
  Kind kind = Kind::kLaunch;
  int index = 0;  // a tensor (allocate, release), a kernel (launch) or a copy
};

struct TensorProgram {
  std::string workload;  // names the workload in error messages
  std::vector<TensorSpec> tensors;
  std::vector<KernelSpec> kernels;
  std::vector<GatherSpec> gathers;
  std::vector<CopySpec> copies;
  std::vector<ProgramStep> setup;      // runs once, before iteration 0
  std::vector<ProgramStep> iteration;  // runs `iterations` times
  int iterations = 0;
};

// Appends steps to one list (setup or iteration) and registers kernels in
// the order they are first launched.
class TensorProgramBuilder {
 public:
  TensorProgramBuilder(TensorProgram& program, const ComputeSpec& spec)
      : program_(program), spec_(spec) {}

  void Into(std::vector<ProgramStep>* steps) { steps_ = steps; }
  void IntoSetup() { Into(&program_.setup); }
  void IntoIteration() { Into(&program_.iteration); }

  int Tensor(std::string name, uint64_t bytes, TensorRole role);
  // A host buffer (TensorSpec::on_host) of role kData.
  int HostTensor(std::string name, uint64_t bytes);
  int Gather(const GatherSpec& gather);
  const TensorSpec& tensor(int index) const { return program_.tensors[index]; }

  void Allocate(int tensor) { steps_->push_back({ProgramStep::Kind::kAllocate, tensor}); }
  void Release(int tensor) { steps_->push_back({ProgramStep::Kind::kRelease, tensor}); }
  void IterationBegin() { steps_->push_back({ProgramStep::Kind::kIterationBegin, 0}); }
  // Copies device tensor `device`'s bytes from or to host tensor `host`
  // (as large or larger): cudaMemcpy, or cudaMemcpyAsync with `async`.
  void Copy(int device, int host, CopyDirection direction, bool async);
  // cudaDeviceSynchronize.
  void Sync() { steps_->push_back({ProgramStep::Kind::kSync, 0}); }

  // Launches kernel `name`. The first launch of a name fixes its accesses
  // and its duration: the roofline time max(flops / peak, bytes / HBM
  // bandwidth), at least 1 us (no launch on a real GPU is shorter).
  // `tensor_cores` picks the peak for half-precision matrix products. Bytes
  // are the sum of the static access sizes plus gather items, unless
  // `bytes` is given (>= 0): for kernels whose accesses overstate the
  // traffic (reading a strided view of a larger tensor, say).
  void Launch(const std::string& name, double flops, bool tensor_cores,
              std::vector<KernelAccess> accesses, double bytes = -1);
  // Launches `name` on the host (KernelPlace::kHost): CPU work that moves
  // `bytes` through host memory, at ComputeSpec::host_memory_bytes_per_second
  // and at least 1 us. `bytes` counts everything the CPU touches, also
  // what lives only in host memory (an optimizer's fp32 state in pinned
  // buffers); `accesses` are its accesses to the program's managed tensors.
  void LaunchOnHost(const std::string& name, double bytes, std::vector<KernelAccess> accesses);
  // The same for one host thread's code (a serial loop): `bytes` read or
  // written, at ComputeSpec::host_thread_bytes_per_second, at least 1 us.
  void LaunchOnHostThread(const std::string& name, double bytes,
                          std::vector<KernelAccess> accesses);
  // Launches with a measured duration (an imported trace).
  void LaunchTimed(const std::string& name, Nanos duration_ns,
                   std::vector<KernelAccess> accesses,
                   KernelPlace place = KernelPlace::kDevice);

  // OK unless a kernel name was launched again with different accesses: a
  // generator bug that would give two launches one execution id.
  const absl::Status& status() const { return status_; }

  // The roofline duration the builder would give a kernel.
  Nanos RooflineNanos(double flops, double bytes, bool tensor_cores) const;

 private:
  double AccessBytes(const std::vector<KernelAccess>& accesses) const;

  TensorProgram& program_;
  const ComputeSpec& spec_;
  void CheckSameAccesses(int kernel, const std::vector<KernelAccess>& accesses);

  std::vector<ProgramStep>* steps_ = nullptr;
  absl::flat_hash_map<std::string, int> kernel_index_;
  absl::Status status_;
};

// What one run of a program holds, measured by running it.
struct ProgramFootprint {
  uint64_t parameter_bytes = 0;        // tensors of role kParameter
  uint64_t optimizer_state_bytes = 0;  // kOptimizerState
  uint64_t data_bytes = 0;             // kData, on the device
  uint64_t host_bytes = 0;             // host buffers (TensorSpec::on_host)
  uint64_t peak_activation_bytes = 0;  // kActivation alive at once
  uint64_t peak_gradient_bytes = 0;    // kGradient alive at once
  uint64_t peak_workspace_bytes = 0;   // kWorkspace alive at once
  uint64_t peak_allocated_bytes = 0;   // allocator: blocks handed to tensors
  uint64_t peak_reserved_bytes = 0;    // allocator: segments (the footprint)
  int kernels_per_iteration = 0;
  int distinct_kernels = 0;            // execution ids, setup included
  Nanos compute_ns_per_iteration = 0;  // sum of kernel durations
  uint64_t events = 0;                 // in the whole stream
};

// A fresh stream over `program`.
std::unique_ptr<EventSource> OpenTensorProgram(std::shared_ptr<const TensorProgram> program);

// Runs the whole stream once and measures it.
absl::StatusOr<ProgramFootprint> MeasureFootprint(
    std::shared_ptr<const TensorProgram> program);

// The footprint lines of `umlab workloads --describe`, indented by two.
std::string DescribeFootprint(const ProgramFootprint& footprint,
                              const std::string& optimizer_state_note);

}  // namespace umlab

#endif  // UMLAB_WORKLOADS_TENSOR_PROGRAM_H_
