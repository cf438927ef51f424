// The uffd device's costs on this machine (reported, never asserted):
//   - fault service overhead: a fault's entry (its message's receipt from
//     the userfaultfd) to the end of the replay that wakes its thread
//     (UFFDIO_WAKE returned), with the throttle off so no modelled transfer
//     or latency time is in it; also the thread's own view (touch to
//     resumed) and the process's CPU time per fault. Target: median <= 20 us.
//   - unthrottled 2 MiB migration (copy into device memory + map) against
//     plain memcpy of 2 MiB measured in the same run, interleaved, so that
//     load from other processes affects both alike. Target: >= 50%.
//   - throttle accuracy: achieved bandwidth of back-to-back 2 MiB
//     migrations through the real-time throttle at 1-8 GB/s. Target: +-5%.
//
// Run: build-uffd/bench/uffd_bench --benchmark_min_time=1
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "backends/emu/uffd_backend.h"
#include "backends/emu/uffd_transfers.h"
#include "benchmark/benchmark.h"
#include "core/engine.h"
#include "backends/emu/pcie_throttle.h"
#include "backends/emu/uffd_device.h"
#include "policies/demand/demand.h"
#include "tests/program_builder.h"

namespace umlab {
namespace {

Nanos ProcessCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Nanos Percentile(std::vector<Nanos> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

DeviceConfig BenchDevice() {
  DeviceConfig device = *DevicePreset("v100-pcie3");
  device.fault_latency_ns = 0;
  return device;
}

// One SM thread touches every page of 16 blocks once: 8192 faults, each
// serviced alone (a batch of one), each migrating one 4 KiB page.
void BM_FaultServiceOverhead(benchmark::State& state) {
  std::vector<Nanos> latencies;
  Nanos stall_ns = 0;
  Nanos cpu_ns = 0;
  uint64_t faults = 0;
  for (auto _ : state) {
    testing::ProgramBuilder program;
    program.Alloc(0, 16);
    std::vector<int> blocks;
    for (int b = 0; b < 16; ++b) blocks.push_back(b);
    program.Kernel(1, 0, blocks, /*write=*/false);
    UffdOptions options;
    options.sms = 1;
    options.throttle = false;
    auto backend = UffdBackend::Create(BenchDevice(), 64, options);
    if (!backend.ok()) {
      state.SkipWithError(std::string(backend.status().message()).c_str());
      return;
    }
    DemandPolicy policy;
    EngineConfig config;
    config.fault_latency_ns = 0;
    Engine engine(**backend, policy, 64, config);
    testing::VectorSource source = program.Source();
    const Nanos cpu_start = ProcessCpuNanos();
    if (absl::Status s = (*backend)->Run(source, engine, nullptr); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    cpu_ns += ProcessCpuNanos() - cpu_start;
    stall_ns += engine.stats().stall_ns;  // one SM: its own stalls
    faults += engine.stats().faults;
    std::vector<Nanos> l = (*backend)->service_latencies();
    latencies.insert(latencies.end(), l.begin(), l.end());
  }
  state.counters["median_us"] = Percentile(latencies, 0.5) / 1e3;
  state.counters["p90_us"] = Percentile(latencies, 0.9) / 1e3;
  state.counters["p99_us"] = Percentile(latencies, 0.99) / 1e3;
  // What the faulting thread sees, on average: touch to resumed, the trap
  // and the wake-ups included.
  state.counters["round_trip_us"] =
      static_cast<double>(stall_ns) / static_cast<double>(faults) / 1e3;
  // CPU time of all the process's threads per fault, run setup included:
  // what the polling costs.
  state.counters["cpu_us_per_fault"] =
      static_cast<double>(cpu_ns) / static_cast<double>(faults) / 1e3;
  state.counters["faults"] = static_cast<double>(faults);
}
BENCHMARK(BM_FaultServiceOverhead)->Unit(benchmark::kMillisecond)->Iterations(5);

constexpr int kSlots = 64;  // 128 MiB: larger than the caches

// The device memory kinds the migration benchmarks compare (their last
// argument): 0, a memfd with the 4 KiB page table; 1, huge frames (hugetlb,
// one PMD per frame; needs free 2 MiB pages in vm.nr_hugepages); 2, a file
// on the tmpfs named by $UMLAB_BENCH_DEVICE_DIR, 4 KiB page table (mount it
// with huge=within_size for 2 MiB folios). A kind this machine lacks skips
// the benchmark with the reason.
absl::StatusOr<std::unique_ptr<UffdDevice>> BenchDeviceMemory(int kind, uint64_t huge_pages) {
  UffdDevice::Options options{.max_blocks = kSlots, .name = "umlab-uffd-bench"};
  if (kind == 1) {
    if (UffdDevice::FreeHugePages() < huge_pages) {
      return absl::FailedPreconditionError("too few free 2 MiB huge pages (vm.nr_hugepages)");
    }
    options.huge_pages = true;
  }
  if (kind == 2) {
    const char* dir = std::getenv("UMLAB_BENCH_DEVICE_DIR");
    if (dir == nullptr || *dir == '\0') {
      return absl::FailedPreconditionError("set UMLAB_BENCH_DEVICE_DIR to a tmpfs directory");
    }
    options.directory = dir;
  }
  auto device = UffdDevice::Create(options);
  if (device.ok()) {
    if (absl::Status s = (*device)->AddSlots(kSlots); !s.ok()) return s;
  }
  return device;
}

// The reference: slot `slot`'s 2 MiB copied between two host buffers with
// memcpy. BM_Memcpy2MiB times it alone; the transfer benchmarks beside each
// round, under the same load. Returns its time.
Nanos TimedMemcpy(std::vector<char>& to, const std::vector<char>& from, int slot) {
  const Nanos start = MonotonicNanos();
  std::memcpy(to.data() + slot * kBlockSize, from.data() + slot * kBlockSize, kBlockSize);
  benchmark::ClobberMemory();
  return MonotonicNanos() - start;
}

// Plain memcpy of 2 MiB between two warm buffers: the reference.
void BM_Memcpy2MiB(benchmark::State& state) {
  const size_t bytes = kSlots * kBlockSize;
  std::vector<char> from(bytes, 1), to(bytes, 2);
  int i = 0;
  for (auto _ : state) {
    state.SetIterationTime(static_cast<double>(TimedMemcpy(to, from, i)) / 1e9);
    i = (i + 1) % kSlots;
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
}
BENCHMARK(BM_Memcpy2MiB)->UseManualTime();

// The counters BM_Migrate2MiB and BM_Evict2MiB share: both copy rates,
// the transfer against memcpy, and the transfer's time beyond its copy per
// round, named `rest` (the map, or the unmap and release).
void SetTransferCounters(benchmark::State& state, Nanos memcpy_ns, Nanos copy_ns,
                         Nanos transfer_ns, const char* rest) {
  state.SetBytesProcessed(state.iterations() * kBlockSize);
  const double copied = static_cast<double>(state.iterations()) * kBlockSize;
  state.counters["memcpy_GBps"] = copied / static_cast<double>(std::max<Nanos>(memcpy_ns, 1));
  state.counters["copy_GBps"] = copied / static_cast<double>(std::max<Nanos>(copy_ns, 1));
  state.counters[rest] = static_cast<double>(transfer_ns - copy_ns) / 1e3 /
                         static_cast<double>(std::max<int64_t>(state.iterations(), 1));
  state.counters["fraction_of_memcpy"] =
      static_cast<double>(memcpy_ns) / static_cast<double>(std::max<Nanos>(transfer_ns, 1));
}

// A 2 MiB migration as the uffd device does it: host copy -> device pages
// (UffdDevice::CopyIn), then one UFFDIO_CONTINUE maps 512 pages (one PMD
// with huge frames). The unmap (MADV_DONTNEED) that makes the next round
// possible is not timed. Argument 0: the frame keeps its memory between
// rounds (a block that gets its frame back: the copy streams through the
// alias); 1: the frame is released after each round, as when the block is
// evicted, so the copy allocates again (the common case under memory
// pressure; pwrite on a memfd, 512 allocations, or one 2 MiB folio on a
// huge tmpfs). Argument 1: the device memory kind (BenchDeviceMemory);
// huge frames need 64 free huge pages for /0, 1 for /1.
// Each iteration also times a plain 2 MiB memcpy as BM_Memcpy2MiB does:
// fraction_of_memcpy compares the two under the same load. copy_GBps and
// map_us split the migration.
void BM_Migrate2MiB(benchmark::State& state) {
  auto device = BenchDeviceMemory(static_cast<int>(state.range(1)),
                                  state.range(0) != 0 ? 1u : uint64_t{kSlots});
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  const size_t bytes = kSlots * kBlockSize;
  std::vector<char> from(bytes, 1), to(bytes, 2);
  const PageMask all = FullPageMask();
  // One untimed round over every slot first: /0 is about frames that kept
  // their memory, not about the first touch of memory the machine never
  // used (milliseconds per 2 MiB on a VM whose host backs guest memory
  // lazily), which otherwise fills the first 64 of a few hundred rounds.
  for (int slot = 0; slot < kSlots; ++slot) {
    if (!(*device)->CopyIn(slot, all, PageMask()).ok() || !(*device)->Map(slot, all, true).ok() ||
        !(*device)->Unmap(slot, all).ok()) {
      state.SkipWithError("warm-up");
      return;
    }
    if (state.range(0) != 0) (void)(*device)->ReleaseFrame(slot);
  }
  Nanos migrate_ns = 0;
  Nanos memcpy_ns = 0;
  Nanos copy_ns = 0;
  int i = 0;
  for (auto _ : state) {
    const Nanos start = MonotonicNanos();
    if (!(*device)->CopyIn(i, all, PageMask()).ok()) state.SkipWithError("copy");
    const Nanos copied_at = MonotonicNanos();
    copy_ns += copied_at - start;
    if (!(*device)->Map(i, all, /*write_protect=*/true).ok()) state.SkipWithError("map");
    const Nanos migrated = MonotonicNanos();
    state.SetIterationTime(static_cast<double>(migrated - start) / 1e9);
    migrate_ns += migrated - start;
    (void)(*device)->Unmap(i, all);
    if (state.range(0) != 0) (void)(*device)->ReleaseFrame(i);
    memcpy_ns += TimedMemcpy(to, from, i);
    i = (i + 1) % kSlots;
  }
  SetTransferCounters(state, memcpy_ns, copy_ns, migrate_ns, "map_us");
}
BENCHMARK(BM_Migrate2MiB)->ArgsProduct({{0, 1}, {0, 1, 2}})->UseManualTime();

// The way back: a 2 MiB eviction as the backend does it, unmap (MADV_DONTNEED
// on the device range), write back (device pages -> host copy) and release
// the frame (fallocate PUNCH_HOLE), timed together, after an untimed
// migration that fills and maps the frame. Argument: the device memory
// kind (BenchDeviceMemory; kind 1 needs 1 free huge page). Counters as for
// BM_Migrate2MiB: copy_GBps is the write-back alone, release_us the unmap
// and release.
void BM_Evict2MiB(benchmark::State& state) {
  auto device = BenchDeviceMemory(static_cast<int>(state.range(0)), 1);
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  const size_t bytes = kSlots * kBlockSize;
  std::vector<char> from(bytes, 1), to(bytes, 2);
  const PageMask all = FullPageMask();
  Nanos evict_ns = 0;
  Nanos memcpy_ns = 0;
  Nanos copy_ns = 0;
  int i = 0;
  for (auto _ : state) {
    if (!(*device)->CopyIn(i, all, PageMask()).ok() || !(*device)->Map(i, all, true).ok()) {
      state.SkipWithError("migration");
    }
    const Nanos start = MonotonicNanos();
    (void)(*device)->Unmap(i, all);
    const Nanos copy_start = MonotonicNanos();
    if (!(*device)->CopyOut(i, all).ok()) state.SkipWithError("copy");
    const Nanos copied_at = MonotonicNanos();
    copy_ns += copied_at - copy_start;
    if (!(*device)->ReleaseFrame(i).ok()) state.SkipWithError("release");
    const Nanos evicted = MonotonicNanos();
    state.SetIterationTime(static_cast<double>(evicted - start) / 1e9);
    evict_ns += evicted - start;
    memcpy_ns += TimedMemcpy(to, from, i);
    i = (i + 1) % kSlots;
  }
  SetTransferCounters(state, memcpy_ns, copy_ns, evict_ns, "release_us");
}
BENCHMARK(BM_Evict2MiB)->DenseRange(0, 2)->UseManualTime();

// The naive alternative, for the record: UFFDIO_COPY of 2 MiB into an
// anonymous range registered for missing faults, then MADV_DONTNEED.
void BM_UffdioCopy2MiB(benchmark::State& state) {
  const int uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
  uffdio_api api{UFFD_API, 0, 0};
  const size_t bytes = kSlots * kBlockSize;
  char* range = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::vector<char> from(bytes, 3);
  uffdio_register reg{{reinterpret_cast<uint64_t>(range), bytes}, UFFDIO_REGISTER_MODE_MISSING, 0};
  if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) != 0 || ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
    state.SkipWithError("no userfaultfd");
    return;
  }
  int i = 0;
  for (auto _ : state) {
    const Nanos start = MonotonicNanos();
    uffdio_copy copy{reinterpret_cast<uint64_t>(range + i * kBlockSize),
                     reinterpret_cast<uint64_t>(from.data() + i * kBlockSize), kBlockSize,
                     UFFDIO_COPY_MODE_DONTWAKE, 0};
    if (ioctl(uffd, UFFDIO_COPY, &copy) != 0) state.SkipWithError("UFFDIO_COPY");
    state.SetIterationTime(static_cast<double>(MonotonicNanos() - start) / 1e9);
    madvise(range + i * kBlockSize, kBlockSize, MADV_DONTNEED);
    i = (i + 1) % kSlots;
  }
  state.SetBytesProcessed(state.iterations() * kBlockSize);
  munmap(range, bytes);
  close(uffd);
}
BENCHMARK(BM_UffdioCopy2MiB)->UseManualTime();

// Counts completions; maps nothing twice.
class BenchHooks final : public UffdTransfers::Hooks {
 public:
  BenchHooks(UffdDevice& device, bool move_data) : device_(device), move_data_(move_data) {}
  void Copy(const Transfer& t) override {
    if (move_data_) (void)device_.CopyIn(t.block, t.copy, PageMask());
  }
  void Land(const Transfer& t) override {
    if (move_data_) (void)device_.Map(t.block, t.pages, true);
  }
  void Completed(TransferId, Nanos) override {
    absl::MutexLock lock(&mu_);
    ++done_;
    last_ = MonotonicNanos();
  }
  void WaitFor(int count) {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (done_ >= count) return;
      }
      absl::SleepFor(absl::Microseconds(50));
    }
  }
  Nanos last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  UffdDevice& device_;
  bool move_data_;
  absl::Mutex mu_;
  int done_ = 0;
  Nanos last_ = 0;
};

// 64 back-to-back 2 MiB migrations through the throttle at `GB/s` with no
// latency and dilation 1: achieved / configured. Second argument 0: the
// throttle alone (no bytes move); 1: real copies and maps too, which cannot
// beat this machine's copy speed (dilation exists for that).
void BM_ThrottleAccuracy(benchmark::State& state) {
  const double gbps = static_cast<double>(state.range(0));
  const bool move_data = state.range(1) != 0;
  auto device = UffdDevice::Create({.max_blocks = kSlots, .name = "umlab-uffd-bench"});
  if (!device.ok() || !(*device)->AddSlots(kSlots).ok()) {
    state.SkipWithError("no userfaultfd");
    return;
  }
  double ratio_sum = 0;
  int rounds = 0;
  for (auto _ : state) {
    for (int i = 0; i < kSlots; ++i) (void)(*device)->Unmap(i, FullPageMask());
    PcieThrottle throttle(LinkConfig{gbps * 1e9, gbps * 1e9, 0}, 1.0, true);
    BenchHooks hooks(**device, move_data);
    UffdTransfers transfers(throttle, hooks);
    const Nanos start = MonotonicNanos();
    for (int i = 0; i < kSlots; ++i) {
      Transfer t;
      t.id = i + 1;
      t.block = i;  // the slot, for these hooks
      t.pages = t.copy = FullPageMask();
      transfers.Submit(t, start);
    }
    hooks.WaitFor(kSlots);
    const double seconds = static_cast<double>(hooks.last() - start) / 1e9;
    ratio_sum += (kSlots * static_cast<double>(kBlockSize) / seconds) / (gbps * 1e9);
    ++rounds;
  }
  state.counters["achieved_over_configured"] = ratio_sum / rounds;
}
BENCHMARK(BM_ThrottleAccuracy)
    ->ArgsProduct({{1, 2, 4, 8}, {0, 1}})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace umlab
