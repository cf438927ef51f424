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

// Storage behind the device (G10's SSD): reached over the same PCIe fabric
// as host memory, so its transfers share the link's bandwidth, each also
// limited by the drive's own bandwidth and paying its latency.
struct StorageConfig {
  bool present = false;
  double read_bytes_per_second = 3.2e9;   // storage -> device
  double write_bytes_per_second = 3.0e9;  // device -> storage
  Nanos read_latency_ns = 20000;
  Nanos write_latency_ns = 16000;
};

struct LinkConfig {
  double h2d_bytes_per_second = 15.754e9;  // PCIe 3 x16, per direction
  double d2h_bytes_per_second = 15.754e9;
  Nanos latency_ns = 5000;                 // per transfer
  // The driver's own work to evict a block before its copy starts: choose
  // the victim, unmap it from the GPU and flush TLBs, get host pages. Paid
  // on the device-to-host lane by every eviction that copies.
  Nanos eviction_overhead_ns = 0;
  // Whether the two directions move at once. The real UVM driver moves one
  // thing at a time per address space: its fault and prefetch paths hold the
  // space's lock for a whole migration, the eviction it needs included.
  bool full_duplex = true;
  // What a policy's call that populates pages (they hold no data: the
  // driver zero-fills and maps them) costs the driver beyond the transfer's
  // latency. Such a call copies nothing, but occupies the driver.
  Nanos populate_overhead_ns = 0;
  StorageConfig storage = {};
  // Remote access (PolicyContext::MapRemote, MemFerry's direct host
  // access): the device's own loads and stores to host memory, a few cache
  // lines each with many in flight, not DMA copies. Their bandwidth per
  // direction (0: the DMA bandwidth of that direction), and the round trip
  // an access waits beyond its bytes' turn on the link (in flight with the
  // others, so it costs no link time).
  double remote_read_bytes_per_second = 0;
  double remote_write_bytes_per_second = 0;
  Nanos remote_latency_ns = 1000;

  // A program's own copies (cudaMemcpy from and to pageable host memory,
  // core/copy_command.h's kDma) per direction (0: the migration rate of
  // that direction, h2d_bytes_per_second or d2h_bytes_per_second). The
  // driver stages pageable data through pinned buffers with the CPU, so
  // this is no faster than the link and can be slower than a migration.
  double dma_h2d_bytes_per_second = 0;
  double dma_d2h_bytes_per_second = 0;

  // How fast the driver's fault path copies to the device (0: at
  // h2d_bytes_per_second). It copies each contiguous run of pages it
  // services, faulted and prefetched, as a copy of its own: on the H200 a
  // run of 8-24 KB took 2.5-3.7 us, so the path moves 5.4-5.7 GB/s where a
  // 2 MiB call's copy moves 48 (docs/devices.md).
  double fault_h2d_bytes_per_second = 0;
  // The driver's own work for each migration of its fault path (a block's
  // pages brought for one batch), beyond the copy: paid whether or not the
  // block needed an eviction (eviction_overhead_ns is paid by those that
  // did), and also by a migration that only zero-fills, which then costs
  // this alone (no copy, no transfer set-up).
  Nanos fault_block_overhead_ns = 0;

  // Whether a policy's prefetch calls to the device (`policy_from=user`)
  // move beside the driver's fault path, on a lane of their own, rather
  // than one thing at a time with it. On the H200 a queue of 2 MiB
  // prefetches to the GPU cost a kernel paging in at the same time nothing
  // and took 1.1-1.3x as long as alone, while a queue of prefetches to the
  // host (pre-evictions) took as long as both one after the other
  // (umlab_call_overlap_probe, docs/devices.md).
  bool prefetch_calls_beside_faults = false;

  double fault_h2d_rate() const {
    return fault_h2d_bytes_per_second > 0 ? fault_h2d_bytes_per_second : h2d_bytes_per_second;
  }
  double dma_h2d_rate() const {
    return dma_h2d_bytes_per_second > 0 ? dma_h2d_bytes_per_second : h2d_bytes_per_second;
  }
  double dma_d2h_rate() const {
    return dma_d2h_bytes_per_second > 0 ? dma_d2h_bytes_per_second : d2h_bytes_per_second;
  }
  double remote_read_rate() const {
    return remote_read_bytes_per_second > 0 ? remote_read_bytes_per_second
                                            : h2d_bytes_per_second;
  }
  double remote_write_rate() const {
    return remote_write_bytes_per_second > 0 ? remote_write_bytes_per_second
                                             : d2h_bytes_per_second;
  }
};

struct DeviceConfig {
  std::string name;
  LinkConfig link;
  ComputeSpec compute;                   // includes the SM count
  Nanos fault_latency_ns = 45000;        // fetch of a batch to first migration
  int fault_batch_size = 256;            // uvm_perf_fault_batch_count
  int fault_buffer_entries = 8192;       // replayable fault buffer capacity
  // The path from a fault to its batch, as the h200 preset measures it
  // (docs/devices.md, "The fault buffer"). The other presets keep the
  // sim's first model (every entry flushed, written at once in the order
  // raised, fetched at once), with which their per-batch latencies were
  // set. The uffd backend's faults are its threads' own, and it flushes
  // every entry.
  //
  // What the flush before a batch's replay discards (the driver's default
  // replay policy, BATCH_FLUSH; emu/fault_buffer.h). kDriver: the entries
  // that were in the buffer when the batch was fetched, so the faults raised
  // while it was serviced make the next batch, unless more than
  // `replay_update_put_percent` of the batch's entries were duplicates, when
  // every entry goes (uvm_perf_fault_replay_update_put_ratio); and the next
  // batch is fetched after the replay. kAll: every entry, always.
  enum class ReplayFlush { kDriver, kAll };
  ReplayFlush replay_flush = ReplayFlush::kAll;
  int replay_update_put_percent = 50;
  // How far apart the GPU writes fault entries into the buffer, each a
  // random one of those raised (emu/fault_write_path.h); 0: at once, in the
  // order raised.
  Nanos fault_write_ns = 0;
  // How long after a fault reaches an empty buffer, with the driver idle,
  // the driver fetches (its interrupt and bottom half); the faults written
  // meanwhile make the batch. Part of an isolated fault's cost, beside
  // fault_latency_ns.
  Nanos fault_wake_ns = 0;
  Nanos kernel_launch_ns = 0;            // gap between back-to-back kernels
  // What a kernel costs beyond its compute once launched: its grid's
  // start-up and wind-down, paid inside the kernel (a kernel with no
  // compute still lasts this long).
  Nanos kernel_grid_ns = 0;
  // Warps per SM that issue accesses, each waiting for its own: a fault
  // stalls one warp, not the SM. What hides the latency of a resident
  // access behind compute (the cuda backend's replay kernel runs the same
  // number).
  int warps_per_sm = 1;
  // The device's own memory where the preset fixes it, as G10's 40 GB GPU:
  // then the default --capacity. 0: none (--capacity defaults to a fraction
  // of the program's footprint).
  uint64_t memory_bytes = 0;
  // With storage: host memory that evicted data may fill before evictions
  // go to storage (G10's CPU memory line; 0, as G10's GDS-only runs, sends
  // every eviction to storage). Without storage the host has no limit.
  uint64_t host_memory_bytes = 0;

  // HUM's staging of a hidden copy (docs/hum.md): host threads copy the
  // source into managed memory nobody has touched yet, 2 MB at a time. One
  // thread does it at `host_stage_bytes_per_second` (the first touch of
  // each page is a fault, which costs more than the copy), and threads slow
  // each other: T threads stage T * rate / (1 + contention * (T - 1))
  // together. Measured on the device machine's host (16-core Intel Xeon,
  // with an H100; bench/hum_copy_probe.cu): one thread 2.51 GB/s; 2, 4, 8
  // and 16 threads 3.89, 6.76, 11.06 and 14.39 GB/s, which the contention
  // 0.117 gives as 4.50, 7.44, 11.06 and 14.62 (fitted at 8 threads,
  // HUM's default).
  double host_stage_bytes_per_second = 2.51e9;
  double host_stage_contention = 0.117;

  // Everything that issues accesses concurrently.
  int access_streams() const { return compute.sm_count * warps_per_sm; }
};

}  // namespace umlab

#endif  // UMLAB_CORE_DEVICE_CONFIG_H_
