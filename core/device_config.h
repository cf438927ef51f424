// The device a backend is created for: its link, its compute and the fault
// path's parameters. This is plain data that every backend reads (sim models
// it, uffd dilates it, cuda reports against it); the named presets and their
// sources live in emu/device_presets.h and docs/devices.md.
#ifndef UMLAB_CORE_DEVICE_CONFIG_H_
#define UMLAB_CORE_DEVICE_CONFIG_H_

#include <string>

#include "core/compute_spec.h"
#include "core/memory_units.h"

namespace umlab {

struct LinkConfig {
  double h2d_bytes_per_second = 15.754e9;  // PCIe 3 x16, per direction
  double d2h_bytes_per_second = 15.754e9;
  Nanos latency_ns = 5000;                 // per transfer
};

struct DeviceConfig {
  std::string name;
  LinkConfig link;
  ComputeSpec compute;                   // includes the SM count
  Nanos fault_latency_ns = 45000;        // fetch of a batch to first migration
  int fault_batch_size = 256;            // uvm_perf_fault_batch_count
  int fault_buffer_entries = 8192;       // replayable fault buffer capacity
  Nanos kernel_launch_ns = 0;            // gap between back-to-back kernels
};

}  // namespace umlab

#endif  // UMLAB_CORE_DEVICE_CONFIG_H_
