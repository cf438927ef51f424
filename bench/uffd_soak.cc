// The uffd device's soak, after the kernel's uffd-stress selftest run at
// scale: SM threads touch a range many times larger than the device at
// random, through a fault buffer smaller than the thread count (so it
// overflows), with blocks freed and reallocated (invalidation) under
// eviction pressure, every registered policy in turn, every word checked.
// It runs until the faults raised reach --faults, then prints the totals
// and the process's resident memory sampled over the run (first decile
// against last), and fails on any corrupted word or failed run.
//
// Run by hand, never in CI (tests/uffd_stress_test.cc is the short one):
//   build/bench/uffd_soak --faults=10000000
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "core/policy.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"
#include "tests/uffd_harness.h"

namespace umlab {
namespace {

struct SoakFlags {
  uint64_t faults = 10000000;        // stop once this many faults were raised
  uint64_t round_accesses = 200000;  // random accesses per policy run
  int sms = 8;
  int blocks = 40;
  int frames = 4;
  int buffer = 4;          // fault-buffer entries (< sms: it overflows)
  int free_every = 8;      // kernels between a block's free and reallocation
};

// Random single-page reads and writes in kernels of 4096, over `blocks`
// blocks, after a kernel that writes them all; between kernels, every
// `free_every` kernels, one random block is freed and allocated again (the
// engine invalidates its pages; the next touch must read zeroes).
class SoakProgram final : public EventSource {
 public:
  SoakProgram(const SoakFlags& flags, uint64_t seed)
      : flags_(flags), rng_(seed) {
    std::vector<int> all;
    for (int b = 0; b < flags.blocks; ++b) all.push_back(b);
    prefix_.Alloc(0, flags.blocks).Kernel(1, 0, all, /*write=*/true);
  }
  bool Next(Event& event) override {
    if (next_prefix_ < prefix_.events().size()) {
      event = prefix_.events()[next_prefix_++];
      return true;
    }
    event = Event();
    if (!in_kernel_) {
      if (pending_alloc_ >= 0) {  // the second half of a free/reallocate
        event.kind = EventKind::kAlloc;
        event.address = testing::ProgramBuilder::BlockAddress(pending_alloc_);
        event.size = kBlockSize;
        pending_alloc_ = -1;
        return true;
      }
      if (emitted_ == flags_.round_accesses) return false;
      if (kernels_ > 0 && kernels_ % flags_.free_every == 0 && !freed_now_) {
        freed_now_ = true;
        pending_alloc_ = static_cast<int>(rng_() % flags_.blocks);
        event.kind = EventKind::kFree;
        event.address = testing::ProgramBuilder::BlockAddress(pending_alloc_);
        event.size = kBlockSize;
        return true;
      }
      freed_now_ = false;
      event.kind = EventKind::kKernelBegin;
      event.exec_id = 2 + kernels_ % 64;
      in_kernel_ = true;
      left_ = std::min<uint64_t>(4096, flags_.round_accesses - emitted_);
      return true;
    }
    if (left_ == 0) {
      event.kind = EventKind::kKernelEnd;
      event.exec_id = 2 + kernels_ % 64;
      in_kernel_ = false;
      ++kernels_;
      return true;
    }
    event = testing::ProgramBuilder::RandomPageAccess(rng_, flags_.blocks);
    --left_;
    ++emitted_;
    return true;
  }

 private:
  SoakFlags flags_;
  std::mt19937_64 rng_;
  testing::ProgramBuilder prefix_;
  size_t next_prefix_ = 0;
  uint64_t emitted_ = 0;
  uint64_t left_ = 0;
  uint64_t kernels_ = 0;
  bool in_kernel_ = false;
  bool freed_now_ = false;
  int pending_alloc_ = -1;
};

// VmRSS of this process, KiB.
uint64_t ResidentKib() {
  uint64_t kib = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtoull(line + 6, nullptr, 10);
    }
    std::fclose(f);
  }
  return kib;
}

bool ParseFlag(const std::string& arg, const char* name, auto& value) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), &parsed) || parsed < 1) {
    std::fprintf(stderr, "uffd_soak: %s needs a positive integer, got '%s'\n", name,
                 arg.c_str());
    std::exit(2);
  }
  value = static_cast<std::remove_reference_t<decltype(value)>>(parsed);
  return true;
}

int Main(int argc, char** argv) {
  SoakFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: uffd_soak [--faults=N] [--round_accesses=N] [--sms=N] [--blocks=N]\n"
          "                 [--frames=N] [--buffer=N] [--free_every=N]\n"
          "Runs every registered policy in turn on the uffd device, with verify on and no\n"
          "throttle, until N faults were raised; prints faults, corrupted words and the\n"
          "resident memory of the first and last tenth of the run (docs/uffd.md).\n"
          "defaults: --faults=%llu --round_accesses=%llu --sms=%d --blocks=%d --frames=%d\n"
          "          --buffer=%d --free_every=%d\n",
          static_cast<unsigned long long>(flags.faults),
          static_cast<unsigned long long>(flags.round_accesses), flags.sms, flags.blocks,
          flags.frames, flags.buffer, flags.free_every);
      return 0;
    }
    if (ParseFlag(arg, "faults", flags.faults) ||
        ParseFlag(arg, "round_accesses", flags.round_accesses) ||
        ParseFlag(arg, "sms", flags.sms) || ParseFlag(arg, "blocks", flags.blocks) ||
        ParseFlag(arg, "frames", flags.frames) || ParseFlag(arg, "buffer", flags.buffer) ||
        ParseFlag(arg, "free_every", flags.free_every)) {
      continue;
    }
    std::fprintf(stderr,
                 "uffd_soak: unknown argument '%s'; flags: --faults --round_accesses --sms "
                 "--blocks --frames --buffer --free_every (positive integers)\n",
                 arg.c_str());
    return 2;
  }
  if (flags.frames >= flags.blocks) {
    std::fprintf(stderr, "uffd_soak: --frames must be below --blocks, or nothing is evicted\n");
    return 2;
  }

  // Resident memory, sampled every 100 ms over the whole soak.
  std::vector<uint64_t> samples;
  absl::Mutex samples_mu;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    while (!done.load()) {
      const uint64_t kib = ResidentKib();
      {
        absl::MutexLock lock(&samples_mu);
        samples.push_back(kib);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  DeviceConfig device = testing::TestDevice(flags.sms);
  device.fault_buffer_entries = flags.buffer;
  device.fault_batch_size = flags.buffer;
  UffdOptions options;
  options.sms = flags.sms;
  options.throttle = false;
  options.verify = true;
  options.watchdog_s = 120;

  uint64_t raised = 0, serviced = 0, dropped = 0, evictions = 0, invalidated = 0;
  uint64_t corrupted = 0, checked = 0, peak_frames = 0, peak_device = 0, restored = 0;
  int runs = 0, failures = 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<const PolicyRegistry::Entry*> policies = Policies().Entries();
  for (size_t turn = 0; raised < flags.faults; ++turn) {
    const std::string name = policies[turn % policies.size()]->name;
    absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(name);
    if (!policy.ok()) {
      std::fprintf(stderr, "uffd_soak: policy %s: %s\n", name.c_str(),
                   std::string(policy.status().message()).c_str());
      return 1;
    }
    SoakProgram program(flags, 20240601 + turn);
    // A planning policy (g10) reads the same program ahead of the run.
    SoakProgram ahead(flags, 20240601 + turn);
    if (absl::Status planned = PlanAhead(**policy, ahead, device,
                                         static_cast<uint64_t>(flags.frames) * kBlockSize);
        !planned.ok()) {
      std::fprintf(stderr, "uffd_soak: policy %s: %s\n", name.c_str(),
                   std::string(planned.message()).c_str());
      return 1;
    }
    const testing::UffdRun run =
        testing::RunOnUffd(program, static_cast<uint64_t>(flags.frames), **policy, device, options);
    ++runs;
    if (!run.status.ok()) {
      ++failures;
      std::fprintf(stderr, "uffd_soak: run %d (%s) failed: %s\n", runs, name.c_str(),
                   std::string(run.status.message()).c_str());
    }
    raised += run.counters.received_faults;
    serviced += run.stats.faults;
    dropped += run.stats.dropped_faults;
    evictions += run.stats.evictions;
    invalidated += run.stats.invalidated_bytes;
    corrupted += run.counters.corrupted_words;
    restored += run.counters.restored_mappings;
    checked += run.counters.pages_checked;
    peak_frames = std::max(peak_frames, run.counters.peak_frames_held);
    peak_device = std::max(peak_device, run.counters.peak_device_bytes);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "run %d %-12s raised %llu total %llu (%.0f/s) corrupted %llu restored %llu "
        "VmRSS %.1f MiB\n",
        runs, name.c_str(), static_cast<unsigned long long>(run.counters.received_faults),
        static_cast<unsigned long long>(raised), static_cast<double>(raised) / seconds,
        static_cast<unsigned long long>(corrupted), static_cast<unsigned long long>(restored),
        static_cast<double>(ResidentKib()) / 1024);
    std::fflush(stdout);
  }
  done.store(true);
  sampler.join();

  const size_t decile = std::max<size_t>(1, samples.size() / 10);
  auto mean = [&](size_t from) {
    double sum = 0;
    for (size_t i = from; i < from + decile; ++i) sum += static_cast<double>(samples[i]);
    return sum / static_cast<double>(decile) / 1024;
  };
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "\nsoak: %d runs over %zu policies, %.0f s, %d sms, %d blocks over %d frames, "
      "fault buffer %d\n"
      "faults raised %llu, serviced %llu, dropped by the full buffer %llu\n"
      "evictions %llu, invalidated %llu MiB, pages checked %llu, corrupted words %llu, "
      "failed runs %d\n"
      "device memory at most %llu frames, %llu MiB; lost mappings restored %llu\n"
      "VmRSS MiB over %zu samples: first decile %.1f, last decile %.1f, max %.1f\n",
      runs, policies.size(), seconds, flags.sms, flags.blocks, flags.frames, flags.buffer,
      static_cast<unsigned long long>(raised), static_cast<unsigned long long>(serviced),
      static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(evictions),
      static_cast<unsigned long long>(invalidated >> 20),
      static_cast<unsigned long long>(checked), static_cast<unsigned long long>(corrupted),
      failures, static_cast<unsigned long long>(peak_frames),
      static_cast<unsigned long long>(peak_device >> 20),
      static_cast<unsigned long long>(restored), samples.size(), mean(0),
      mean(samples.size() - decile),
      static_cast<double>(*std::max_element(samples.begin(), samples.end())) / 1024);
  return corrupted == 0 && failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace umlab

int main(int argc, char** argv) { return umlab::Main(argc, argv); }
