// What a workload generator needs to know about the device to turn a
// kernel's FLOPs and bytes into compute time (roofline style).
#ifndef UMLAB_CORE_COMPUTE_SPEC_H_
#define UMLAB_CORE_COMPUTE_SPEC_H_

#include <algorithm>
#include <cmath>

#include "core/memory_units.h"

namespace umlab {

struct ComputeSpec {
  double peak_flops_fp32 = 19.5e12;       // FLOP/s without tensor cores
  double peak_flops_tensor = 312e12;      // FLOP/s for fp16/bf16 matrix work
  double memory_bytes_per_second = 1.555e12;  // HBM bandwidth
  int sm_count = 108;
  // What host kernels (KernelPlace::kHost) run at: the CPU's memory
  // bandwidth as a multi-threaded streaming kernel sustains it (CPU-Adam
  // is bound by it: it touches 28 bytes per fp16 parameter and does a few
  // FLOPs per byte). Presets give their source (emu/device_presets.cc).
  double host_memory_bytes_per_second = 50e9;
  // What one host thread's plain code streams through memory (a benchmark's
  // serial host loop between its copies, docs/hum.md): a memcpy between
  // warm buffers ran at 8.52 GB/s copied on the device machine's host
  // (16-core Intel Xeon with an H100; bench/hum_copy_probe.cu), each byte
  // read and written, so 17.04 GB/s touched.
  double host_thread_bytes_per_second = 17.04e9;
};

// A kernel's compute time on `spec` by the roofline: its FLOPs at the peak
// rate (tensor-core or fp32) or its device-memory bytes at the memory
// bandwidth, whichever takes longer, and never under a microsecond (the
// floor workloads/tensor_program.h's builder has always given kernels).
inline Nanos RooflineNanos(const ComputeSpec& spec, double flops, double bytes,
                           bool tensor_cores = false) {
  const double peak = tensor_cores ? spec.peak_flops_tensor : spec.peak_flops_fp32;
  const double seconds = std::max(flops / peak, bytes / spec.memory_bytes_per_second);
  const double nanos = std::ceil(seconds * 1e9);
  return nanos < 1000.0 ? 1000 : static_cast<Nanos>(nanos);
}

}  // namespace umlab

#endif  // UMLAB_CORE_COMPUTE_SPEC_H_
