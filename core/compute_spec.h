// What a workload generator needs to know about the device to turn a
// kernel's FLOPs and bytes into compute time (roofline style).
#ifndef UMLAB_CORE_COMPUTE_SPEC_H_
#define UMLAB_CORE_COMPUTE_SPEC_H_

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

}  // namespace umlab

#endif  // UMLAB_CORE_COMPUTE_SPEC_H_
