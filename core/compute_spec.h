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
};

}  // namespace umlab

#endif  // UMLAB_CORE_COMPUTE_SPEC_H_
