#include "emu/device_presets.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace umlab {

NamedIndex<DevicePresetEntry>& DevicePresets() {
  static NamedIndex<DevicePresetEntry>* presets =
      new NamedIndex<DevicePresetEntry>("device preset");
  return *presets;
}

// The presets. Registered here rather than in files of their own: a static
// library drops an object file nothing references, and this one is always
// linked. Fields left out keep DeviceConfig's defaults (the driver's fault
// batch of 256, a fault buffer of 8192 entries, no launch gap).

UMLAB_REGISTER_DEVICE(
    v100_pcie3,
    {"v100-pcie3", "V100 on PCIe 3 x16: G10's simulated machine",
     DeviceConfig{
         // PCIe 3 x16 per direction and 5 us per transfer, as in G10's
         // configuration (G10, Table 2). A program's own cudaMemcpy from
         // pageable memory is slower than the link: the driver stages it
         // through pinned buffers with one CPU thread. On the device
         // machine (an H100 on PCIe 5) it ran at 8.58 GB/s to the device
         // and 13.38 GB/s back, one thread's memcpy being 8.52 GB/s
         // (bench/hum_copy_probe.cu); the CPU, not PCIe 3, is the limit.
         .link = {.h2d_bytes_per_second = 15.754e9,
                  .d2h_bytes_per_second = 15.754e9,
                  .latency_ns = 5000,
                  .dma_h2d_bytes_per_second = 8.58e9,
                  .dma_d2h_bytes_per_second = 13.38e9},
         // fp32, tensor FLOP/s, HBM bandwidth, SMs: NVIDIA's V100 figures.
         // The host's CPU-Adam pace: MemFerry's V100 machine has 12 CPU
         // cores; PyTorch's fused CPU Adam ran at 114 GB/s on 16 cores of
         // the device machine's Xeon (bench/results/cpu-adam-h100-host),
         // 7.1 GB/s a core, so 12 cores at that pace. An assumption: no
         // source measures that machine.
         .compute = {15.7e12, 125e12, 900e9, 80, 85.6e9},
         .fault_latency_ns = 45000,  // G10, Table 2
     }});

UMLAB_REGISTER_DEVICE(
    v100_nvlink2,
    {"v100-nvlink2", "V100 on NVLink 2.0 to a POWER9 host: the LMS paper's fast machine",
     DeviceConfig{
         // The LMS paper's AC922 with four V100s (SysML '18): NVLink 2.0
         // "connects CPUs and GPUs with 150GB/s", against 16 GB/s for PCIe
         // 3, whose figure is per direction; with four GPUs each has three
         // 25 GB/s bricks to its CPU, 75 GB/s each way and 150 GB/s both
         // ways together. The per-transfer cost is v100-pcie3's (no source
         // gives NVLink's).
         .link = {75e9, 75e9, 5000},
         .compute = {15.7e12, 125e12, 900e9, 80, 85.6e9},  // as v100-pcie3
         .fault_latency_ns = 45000,                // as v100-pcie3 (G10)
     }});

UMLAB_REGISTER_DEVICE(
    a100_pcie4, {"a100-pcie4", "A100 on PCIe 4 x16: the V100 machine with twice the link",
                 DeviceConfig{
                     .link = {31.508e9, 31.508e9, 5000},  // PCIe 4 x16: twice PCIe 3
                     // NVIDIA's A100 figures; the host as the device
                     // machine's (h200 below).
                     .compute = {19.5e12, 312e12, 1555e9, 108, 114e9},
                     .fault_latency_ns = 45000,                  // as v100-pcie3 (G10)
                 }});

UMLAB_REGISTER_DEVICE(
    h200,
    {"h200", "H200 with CUDA 13, calibrated by umlab_cuda_calibrate",
     DeviceConfig{
         // Calibrated on an H200 with CUDA 13 by umlab_cuda_calibrate (numbers
         // and method in docs/devices.md). The engine moves at most one 2 MB
         // block per transfer, so the link is fitted to per-block calls, not
         // bulk ones: a 2 MiB prefetch took 151 us to the GPU and 181 us back,
         // which with 10 us per transfer gives 14.9 and 12.3 GB/s.
         // The driver's fault path costs 175 us per migration it makes
         // beyond the copy, zero-fills included, and its evictions cost no
         // more than their copies; it moves one thing at a time (its fault
         // and prefetch paths hold the address space's lock for a whole
         // migration; CUPTI's records overlap under 1%). With CUPTI on, as
         // the cuda backend runs, paging in with room free took 520 to 690
         // us a block, and paging in discarded blocks (nothing to copy) 250
         // to 390 (umlab_call_overlap_probe, 2026-11-27): the cost
         // is the fault path's, not the eviction's. 175 is fitted to
         // demand's rows over seven H200 passes (docs/devices.md) since the
         // fault buffer was modelled as the driver's event queue shows it
         // (2026-11-27; 115 before, when the sim's batches held 256
         // consecutive pages and split most blocks between two migrations).
         // A policy's call that populates (no data to copy) took 34.5 us per
         // 2 MiB with room free: 10 us of transfer set-up and 24.5 us of the
         // driver's zero-fill and mapping (umlab_cuda_calibrate's
         // policy_calls, 2026-11-26).
         // The device's own accesses to managed memory advised to the host
         // (umlab_remote_probe on an H200, 2026-11-26): whole-GPU streams
         // read at 51.3 GB/s and write at 52.6, and one dependent access
         // took 1,194 ns against 151 in HBM, so 1.04 us beyond it.
         .link = {14.9e9, 12.3e9, 10000, /*eviction_overhead_ns=*/0, /*full_duplex=*/false,
                  /*populate_overhead_ns=*/24500, /*storage=*/{},
                  /*remote_read_bytes_per_second=*/51.3e9,
                  /*remote_write_bytes_per_second=*/52.6e9, /*remote_latency_ns=*/1040,
                  /*dma_h2d_bytes_per_second=*/0, /*dma_d2h_bytes_per_second=*/0,
                  /*fault_h2d_bytes_per_second=*/0, /*fault_block_overhead_ns=*/175000},
         // NVIDIA's H200 figures. The host: PyTorch 2.11's fused CPU Adam
         // ran at 114 GB/s (0.245 ns a parameter, 28 bytes each) on the
         // 16-core Xeon of the device machine that held an H100, whose
         // plain copy ran at 91-123 GB/s (bench/results/cpu-adam-h100-host).
         .compute = {67e12, 989e12, 4.8e12, 132, 114e9},
         // An isolated fault took 31 us end to end: 20 us of fault handling
         // (2.3 of them before the driver fetches: fault_wake_ns below),
         // 10 us of transfer set-up, one page.
         .fault_latency_ns = 17700,
         // The fault buffer as the driver's own event queue shows it (run 75,
         // bench/fault_batch_shapes.py on mlp and bert-base): the GPU writes
         // an entry every 20.3 ns in a burst (256 in 5.2 us), in no order of
         // address to speak of (57% of steps go up a page), and the first
         // batch after the buffer ran dry held what 2.3 us had brought
         // (median); between batches the driver flushes as BATCH_FLUSH does.
         .replay_flush = DeviceConfig::ReplayFlush::kDriver,
         .fault_write_ns = 20,
         .fault_wake_ns = 2300,
         // Between kernels of a run the GPU idled 2.5 us on average (the
         // steady iterations at capacity 1.0 of fidelity run 8: 2.47-2.65 us
         // per gap; umlab_cuda_calibrate's launch_gap, 2.27-3.25 us over
         // runs). Inside each, the replay kernel's 1056-issuer grid took
         // 2.89 us to start and wind down (full_grid_kernel: one resident
         // page per issuer, no compute).
         .kernel_launch_ns = 2500,
         .kernel_grid_ns = 2890,
         // A resident access costs the cuda backend's replay kernel 547 ns
         // per SM with one issuing warp, more than most zoo kernels' compute
         // per access (132-782 ns on average); with 8 warps per SM, 99 ns.
         .warps_per_sm = 8,
     }});

UMLAB_REGISTER_DEVICE(
    g10_a100,
    {"g10-a100",
     "G10's simulated A100 (G10, Table 2): 40 GiB of GPU memory (the default capacity), a "
     "128 GiB host line, then an SSD",
     DeviceConfig{
         // PCIe 15.754 GB/s per direction with 5 us per transfer (G10's
         // example.config PCIe_latency_us), host and SSD sharing it.
         .link = {15.754e9, 15.754e9, 5000, 0, /*full_duplex=*/true,
                  /*populate_overhead_ns=*/0,
                  // Z-NAND SSD, G10 Table 2: 3.2/3.0 GB/s, 20/16 us. (The
                  // artifact's example.config has one 3.2 GB/s for both
                  // directions and a 12 us read; docs/devices.md.)
                  StorageConfig{true, 3.2e9, 3.0e9, 20000, 16000}},
         // NVIDIA's A100 figures; the host as the device machine's.
         .compute = {19.5e12, 312e12, 1555e9, 108, 114e9},
         .fault_latency_ns = 45000,  // G10 Table 2
         // G10's GPU_memory_size_GB and CPU_memory_line_GB, counted in GiB
         // as its simulator does.
         .memory_bytes = 40ull << 30,
         .host_memory_bytes = 128ull << 30,
     }});

namespace {

std::string Number(double value) { return absl::StrFormat("%g", value); }

// Counts stored as int in DeviceConfig.
constexpr ParamRange kIntCount = ParamRange::Closed(1, std::numeric_limits<int>::max());
// Rates in GB/s or TFLOP/s: beyond any device, and small enough that the
// model's arithmetic on bytes per second stays finite (the fuzzer found
// that an unbounded rate times 1e12 overflows to infinity).
constexpr ParamRange kRate = ParamRange::OpenClosed(0, 1e9);
// A rate where 0 stands for another one (the remote rates: the DMA rate).
constexpr ParamRange kRateOrZero = ParamRange::Closed(0, 1e9);
// Microseconds that fit in int64 nanoseconds, with room to add them up.
constexpr ParamRange kMicros = ParamRange::Closed(0, 1e12);

}  // namespace

absl::StatusOr<DeviceConfig> DevicePreset(absl::string_view name) {
  const DevicePresetEntry* entry = DevicePresets().Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown device '%s'; presets: %s", name, DevicePresets().Names()));
  }
  DeviceConfig config = entry->config;
  config.name = entry->name;
  return config;
}

std::vector<ParamInfo> DeviceParams(const DeviceConfig& c) {
  return {
      {"sms", ParamType::kInt, Number(c.compute.sm_count), "concurrent SMs issuing accesses",
       kIntCount},
      {"h2d_gbps", ParamType::kDouble, Number(c.link.h2d_bytes_per_second / 1e9),
       "host-to-device bandwidth, GB/s", kRate},
      {"d2h_gbps", ParamType::kDouble, Number(c.link.d2h_bytes_per_second / 1e9),
       "device-to-host bandwidth, GB/s", kRate},
      {"fault_gbps", ParamType::kDouble, Number(c.link.fault_h2d_bytes_per_second / 1e9),
       "how fast the driver's fault path copies to the device (sim), GB/s (0: h2d_gbps)",
       kRateOrZero},
      {"fault_block_us", ParamType::kDouble, Number(c.link.fault_block_overhead_ns / 1e3),
       "the driver's fault path's own cost per migration, zero-fills included, beyond the "
       "copy, us",
       kMicros},
      {"link_latency_us", ParamType::kDouble, Number(c.link.latency_ns / 1e3),
       "fixed cost of one transfer, us", kMicros},
      {"duplex", ParamType::kBool, c.link.full_duplex ? "true" : "false",
       "both link directions move at once (false: one transfer at a time, as the UVM driver)"},
      {"call_lane", ParamType::kBool, c.link.prefetch_calls_beside_faults ? "true" : "false",
       "a policy's prefetch calls to the device move beside the driver's fault path, on a lane "
       "of their own (sim, policy_from=user; false: one thing at a time with it)"},
      {"evict_us", ParamType::kDouble, Number(c.link.eviction_overhead_ns / 1e3),
       "the driver's own cost per eviction before its copy, us", kMicros},
      {"populate_us", ParamType::kDouble, Number(c.link.populate_overhead_ns / 1e3),
       "the driver's cost for a policy's call that populates pages with no data (zero-fill), "
       "beyond the link's latency, us",
       kMicros},
      {"fault_latency_us", ParamType::kDouble, Number(c.fault_latency_ns / 1e3),
       "fault-handling latency per batch, us", kMicros},
      {"batch", ParamType::kInt, Number(c.fault_batch_size), "fault entries per batch",
       kIntCount},
      {"fault_buffer", ParamType::kInt, Number(c.fault_buffer_entries),
       "fault-buffer entries before overflow", kIntCount},
      {"replay_flush", ParamType::kString,
       c.replay_flush == DeviceConfig::ReplayFlush::kDriver ? "driver" : "all",
       "what the flush before a batch's replay discards (sim): driver (the entries there when "
       "the batch was fetched, so faults raised during its service make the next batch, unless "
       "duplicates exceed update_put_pct; the UVM driver's BATCH_FLUSH) or all (every entry)",
       {}, {"driver", "all"}},
      {"fault_write_ns", ParamType::kInt, Number(c.fault_write_ns),
       "how far apart the GPU writes fault entries into the buffer, each a random one of those "
       "raised (sim), ns (0: at once, in the order raised)",
       ParamRange::AtLeast(0)},
      {"fault_wake_us", ParamType::kDouble, Number(c.fault_wake_ns / 1e3),
       "how long after a fault reaches an idle driver's empty buffer the driver fetches (sim), us",
       kMicros},
      {"update_put_pct", ParamType::kInt, Number(c.replay_update_put_percent),
       "replay_flush=driver: the share of a batch's entries, in percent, that may be "
       "duplicates before its flush discards every entry (sim; "
       "uvm_perf_fault_replay_update_put_ratio)",
       ParamRange::Closed(0, 100)},
      {"fp32_tflops", ParamType::kDouble, Number(c.compute.peak_flops_fp32 / 1e12),
       "peak fp32 TFLOP/s", kRate},
      {"tensor_tflops", ParamType::kDouble, Number(c.compute.peak_flops_tensor / 1e12),
       "peak fp16/bf16 matrix TFLOP/s", kRate},
      {"hbm_gbps", ParamType::kDouble, Number(c.compute.memory_bytes_per_second / 1e9),
       "device memory bandwidth, GB/s", kRate},
      {"cpu_gbps", ParamType::kDouble, Number(c.compute.host_memory_bytes_per_second / 1e9),
       "the host CPU's memory bandwidth, which host kernels (an optimizer step on the CPU) "
       "run at, GB/s",
       kRate},
      {"cpu_thread_gbps", ParamType::kDouble,
       Number(c.compute.host_thread_bytes_per_second / 1e9),
       "what one host thread's serial code streams through memory (a benchmark's host loop), "
       "GB/s",
       kRate},
      {"launch_us", ParamType::kDouble, Number(c.kernel_launch_ns / 1e3),
       "gap between kernels, us", kMicros},
      {"grid_us", ParamType::kDouble, Number(c.kernel_grid_ns / 1e3),
       "a kernel's grid start-up and wind-down beyond its compute, us", kMicros},
      {"warps", ParamType::kInt, Number(c.warps_per_sm),
       "warps per SM issuing accesses, each stalling alone on a fault", ParamRange::Closed(1, 64)},
      {"memory_gib", ParamType::kDouble,
       Number(static_cast<double>(c.memory_bytes) / (1ull << 30)),
       "the device's memory, GiB: the default --capacity (0: --capacity defaults to a fraction "
       "of the footprint)",
       ParamRange::Closed(0, 1e9)},
      {"ssd", ParamType::kBool, c.link.storage.present ? "true" : "false",
       "storage behind the device: evictions past the host's line go to it (sim and uffd "
       "backends)"},
      {"host_gib", ParamType::kDouble, Number(static_cast<double>(c.host_memory_bytes) / (1ull << 30)),
       "with ssd: host memory for evicted data before evictions go to storage, GiB (0: all go "
       "to storage)",
       ParamRange::Closed(0, 1e9)},
      {"ssd_read_gbps", ParamType::kDouble, Number(c.link.storage.read_bytes_per_second / 1e9),
       "with ssd: storage-to-device bandwidth, GB/s (the link's still caps it)", kRate},
      {"ssd_write_gbps", ParamType::kDouble, Number(c.link.storage.write_bytes_per_second / 1e9),
       "with ssd: device-to-storage bandwidth, GB/s", kRate},
      {"ssd_read_us", ParamType::kDouble, Number(c.link.storage.read_latency_ns / 1e3),
       "with ssd: storage read latency per transfer, us", kMicros},
      {"ssd_write_us", ParamType::kDouble, Number(c.link.storage.write_latency_ns / 1e3),
       "with ssd: storage write latency per transfer, us", kMicros},
      {"remote_read_gbps", ParamType::kDouble, Number(c.link.remote_read_bytes_per_second / 1e9),
       "the device reading host memory through a remote mapping, GB/s (0: h2d_gbps)",
       kRateOrZero},
      {"remote_write_gbps", ParamType::kDouble,
       Number(c.link.remote_write_bytes_per_second / 1e9),
       "the device writing host memory through a remote mapping, GB/s (0: d2h_gbps)",
       kRateOrZero},
      {"remote_latency_us", ParamType::kDouble, Number(c.link.remote_latency_ns / 1e3),
       "round trip of one remote access beyond its bytes' time on the link, us", kMicros},
      {"dma_h2d_gbps", ParamType::kDouble, Number(c.link.dma_h2d_bytes_per_second / 1e9),
       "a program's cudaMemcpy from pageable host memory to the device, GB/s (0: h2d_gbps)",
       kRateOrZero},
      {"dma_d2h_gbps", ParamType::kDouble, Number(c.link.dma_d2h_bytes_per_second / 1e9),
       "a program's cudaMemcpy from the device to pageable host memory, GB/s (0: d2h_gbps)",
       kRateOrZero},
      {"stage_gbps", ParamType::kDouble, Number(c.host_stage_bytes_per_second / 1e9),
       "one host thread copying into untouched managed memory (HUM's staging), GB/s", kRate},
      {"stage_contention", ParamType::kDouble, Number(c.host_stage_contention),
       "how much staging threads slow each other: T threads stage T * stage_gbps / (1 + "
       "contention * (T - 1)) together",
       ParamRange::Closed(0, 1e6)},
  };
}

absl::StatusOr<DeviceConfig> ApplyDeviceOverrides(const DeviceConfig& config,
                                                  absl::string_view overrides) {
  const std::vector<ParamInfo> declared = DeviceParams(config);
  absl::StatusOr<ParamMap> params =
      ParamMap::Resolve(declared, overrides, absl::StrFormat("device %s", config.name));
  if (!params.ok()) return params.status();
  DeviceConfig c = config;
  c.compute.sm_count = static_cast<int>(params->Int("sms"));
  c.link.h2d_bytes_per_second = params->Double("h2d_gbps") * 1e9;
  c.link.d2h_bytes_per_second = params->Double("d2h_gbps") * 1e9;
  c.link.fault_h2d_bytes_per_second = params->Double("fault_gbps") * 1e9;
  c.link.latency_ns = std::llround(params->Double("link_latency_us") * 1e3);
  c.link.fault_block_overhead_ns = std::llround(params->Double("fault_block_us") * 1e3);
  c.link.eviction_overhead_ns = std::llround(params->Double("evict_us") * 1e3);
  c.link.populate_overhead_ns = std::llround(params->Double("populate_us") * 1e3);
  c.link.full_duplex = params->Bool("duplex");
  c.link.prefetch_calls_beside_faults = params->Bool("call_lane");
  c.fault_latency_ns = std::llround(params->Double("fault_latency_us") * 1e3);
  c.fault_batch_size = static_cast<int>(params->Int("batch"));
  c.fault_buffer_entries = static_cast<int>(params->Int("fault_buffer"));
  c.replay_flush = static_cast<DeviceConfig::ReplayFlush>(params->Choice("replay_flush"));
  c.replay_update_put_percent = static_cast<int>(params->Int("update_put_pct"));
  c.fault_write_ns = params->Int("fault_write_ns");
  c.fault_wake_ns = std::llround(params->Double("fault_wake_us") * 1e3);
  c.compute.peak_flops_fp32 = params->Double("fp32_tflops") * 1e12;
  c.compute.peak_flops_tensor = params->Double("tensor_tflops") * 1e12;
  c.compute.memory_bytes_per_second = params->Double("hbm_gbps") * 1e9;
  c.compute.host_memory_bytes_per_second = params->Double("cpu_gbps") * 1e9;
  c.compute.host_thread_bytes_per_second = params->Double("cpu_thread_gbps") * 1e9;
  c.kernel_launch_ns = std::llround(params->Double("launch_us") * 1e3);
  c.kernel_grid_ns = std::llround(params->Double("grid_us") * 1e3);
  c.warps_per_sm = static_cast<int>(params->Int("warps"));
  c.memory_bytes = static_cast<uint64_t>(std::llround(params->Double("memory_gib") * (1ull << 30)));
  c.link.storage.present = params->Bool("ssd");
  c.host_memory_bytes = static_cast<uint64_t>(std::llround(params->Double("host_gib") * (1ull << 30)));
  c.link.storage.read_bytes_per_second = params->Double("ssd_read_gbps") * 1e9;
  c.link.storage.write_bytes_per_second = params->Double("ssd_write_gbps") * 1e9;
  c.link.storage.read_latency_ns = std::llround(params->Double("ssd_read_us") * 1e3);
  c.link.storage.write_latency_ns = std::llround(params->Double("ssd_write_us") * 1e3);
  c.link.remote_read_bytes_per_second = params->Double("remote_read_gbps") * 1e9;
  c.link.remote_write_bytes_per_second = params->Double("remote_write_gbps") * 1e9;
  c.link.remote_latency_ns = std::llround(params->Double("remote_latency_us") * 1e3);
  c.link.dma_h2d_bytes_per_second = params->Double("dma_h2d_gbps") * 1e9;
  c.link.dma_d2h_bytes_per_second = params->Double("dma_d2h_gbps") * 1e9;
  c.host_stage_bytes_per_second = params->Double("stage_gbps") * 1e9;
  c.host_stage_contention = params->Double("stage_contention");
  return c;
}

}  // namespace umlab
