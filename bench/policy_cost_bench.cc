// The policies' own CPU cost per fault, and DeepUM's table memory.
//
// BM_PolicyOnMlp runs a whole mlp training on the sim with the policy
// wrapped in a timer: policy_ns_per_fault is the time spent inside the
// policy's hooks and decisions divided by the raw faults of the run, the
// average a user sees. BM_DeepUmWarmChains drives DeepUM's hooks directly on
// a synthetic program of 20,000 blocks whose tables are warm, with one
// faulted block per batch, the worst case for chaining (every batch restarts
// a walk over the next N kernels); it reports the cost per raw fault entry
// and table_bytes.
#include <chrono>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "backends/emu/sim_backend.h"
#include "cli/runner/experiment.h"
#include "core/engine.h"
#include "core/memory_state.h"
#include "core/policy.h"
#include "emu/device_presets.h"
#include "policies/deepum/deepum.h"

namespace umlab {
namespace {

using Clock = std::chrono::steady_clock;

// Forwards every hook and decision to `inner`, timing each call.
class TimedPolicy final : public Policy {
 public:
  explicit TimedPolicy(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}

  void OnFaultBatch(const FaultBatch& batch) override {
    Time([&] { inner_->OnFaultBatch(batch); });
  }
  void OnKernelBegin(uint32_t id) override { Time([&] { inner_->OnKernelBegin(id); }); }
  void OnKernelEnd(uint32_t id) override { Time([&] { inner_->OnKernelEnd(id); }); }
  void OnMigrated(BlockNumber b, const PageMask& p, TransferKind k) override {
    Time([&] { inner_->OnMigrated(b, p, k); });
  }
  void OnEvicted(BlockNumber b, const PageMask& p) override {
    Time([&] { inner_->OnEvicted(b, p); });
  }
  void OnAllocatorEvent(const Event& e) override { Time([&] { inner_->OnAllocatorEvent(e); }); }
  void OnFreeSpaceChanged(uint64_t f) override { Time([&] { inner_->OnFreeSpaceChanged(f); }); }
  PageMask ExpandFault(BlockNumber b, const PageMask& f) override {
    PageMask out;
    Time([&] { out = inner_->ExpandFault(b, f); });
    return out;
  }
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& q) override {
    std::optional<BlockNumber> out;
    Time([&] { out = inner_->ChooseVictim(q); });
    return out;
  }
  PageMask PagesToDrop(const BlockState& v) override {
    PageMask out;
    Time([&] { out = inner_->PagesToDrop(v); });
    return out;
  }
  bool UnlimitedCapacity() const override { return inner_->UnlimitedCapacity(); }
  uint64_t TableBytes() const override { return inner_->TableBytes(); }

  double seconds() const { return std::chrono::duration<double>(spent_).count(); }

 private:
  template <typename Fn>
  void Time(Fn fn) {
    if (!bound_) {
      inner_->Bind(&context());
      bound_ = true;
    }
    const auto start = Clock::now();
    fn();
    spent_ += Clock::now() - start;
  }

  std::unique_ptr<Policy> inner_;
  bool bound_ = false;
  Clock::duration spent_{};
};

void BM_PolicyOnMlp(benchmark::State& state, const char* spec) {
  const DeviceConfig device = *DevicePreset("v100-pcie3");
  absl::StatusOr<cli::ProgramInput> program =
      cli::ProgramInput::FromWorkload("mlp", {}, device.compute);
  if (!program.ok()) {
    state.SkipWithError(std::string(program.status().message()).c_str());
    return;
  }
  const uint64_t frames = program->summary().footprint_bytes / 2 / kBlockSize;
  double policy_seconds = 0;
  uint64_t faults = 0, table_bytes = 0;
  for (auto _ : state) {
    TimedPolicy policy(*Policies().Create(spec));
    SimBackend backend(device, frames);
    EngineConfig config;
    config.batch_size = device.fault_batch_size;
    config.fault_latency_ns = device.fault_latency_ns;
    Engine engine(backend, policy, frames, config);
    std::unique_ptr<EventSource> source = *program->Open();
    if (absl::Status status = backend.Run(*source, engine, nullptr); !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
    policy_seconds += policy.seconds();
    faults += engine.stats().faults;
    table_bytes = policy.TableBytes();
  }
  state.counters["policy_ns_per_fault"] = 1e9 * policy_seconds / static_cast<double>(faults);
  state.counters["faults_per_run"] =
      static_cast<double>(faults) / static_cast<double>(state.iterations());
  state.counters["table_bytes"] = static_cast<double>(table_bytes);
}
BENCHMARK_CAPTURE(BM_PolicyOnMlp, demand, "demand")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PolicyOnMlp, uvm_default, "uvm-default")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PolicyOnMlp, deepum, "deepum")->Unit(benchmark::kMillisecond);

// A context that accepts every request and remembers nothing but counts.
class CountingContext final : public PolicyContext {
 public:
  CountingContext() : memory_(1u << 20) {}
  const MemoryView& memory() const override { return memory_; }
  Nanos now() const override { return 0; }
  uint32_t current_exec_id() const override { return 0; }
  void Prefetch(BlockNumber, const PageMask&, uint32_t) override { ++queued_; }
  void Populate(BlockNumber, const PageMask&) override {}
  void CancelPrefetches() override { queued_ = 0; }
  size_t queued_prefetches() const override { return queued_; }
  void PreEvict(BlockNumber) override {}
  void PreEvictPages(BlockNumber, const PageMask&, MemoryTier) override {}
  void Discard(BlockNumber, const PageMask&) override {}
  void SetPinned(BlockNumber, bool) override {}
  void MapRemote(BlockNumber, const PageMask&) override {}
  void UnmapRemote(BlockNumber, const PageMask&) override {}

 private:
  MemoryState memory_;
  size_t queued_ = 0;
};

void BM_DeepUmWarmChains(benchmark::State& state) {
  constexpr int kKernels = 200, kBlocksPerKernel = 100;  // 20,000 blocks
  constexpr int kEntriesPerBlock = 48;  // raw faults per faulted block on the sim's mlp
  CountingContext context;
  DeepUmPolicy policy{DeepUmOptions{}};
  policy.Bind(&context);
  std::vector<FaultEntry> raw(kEntriesPerBlock);
  FaultedBlock grouped;
  auto run_iteration = [&](int fault_every) {
    uint64_t faults = 0;
    for (int k = 0; k < kKernels; ++k) {
      const uint32_t exec_id = static_cast<uint32_t>(k + 1);
      policy.OnKernelBegin(exec_id);
      for (int b = 0; b < kBlocksPerKernel; b += fault_every) {
        const BlockNumber block = static_cast<BlockNumber>(k) * kBlocksPerKernel + b;
        for (FaultEntry& entry : raw) {
          entry.page = FirstPageOfBlock(block);
          entry.exec_id = exec_id;
        }
        grouped = FaultedBlock{block, PageMask().set(0), PageMask()};
        policy.OnFaultBatch(FaultBatch{0, absl::MakeConstSpan(raw),
                                       absl::MakeConstSpan(&grouped, 1)});
        faults += raw.size();
      }
      policy.OnKernelEnd(exec_id);
    }
    return faults;
  };
  // Two iterations with every block faulting teach the tables.
  run_iteration(1);
  run_iteration(1);
  uint64_t faults = 0;
  for (auto _ : state) faults += run_iteration(/*fault_every=*/10);
  state.counters["seconds_per_fault"] = benchmark::Counter(
      static_cast<double>(faults), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["table_bytes"] = static_cast<double>(policy.TableBytes());
  state.counters["blocks"] = kKernels * kBlocksPerKernel;
}
BENCHMARK(BM_DeepUmWarmChains)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace umlab
