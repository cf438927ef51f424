// Simulator throughput in page accesses per second (target: 10 M/s on one
// core of a CI machine), on the mlp workload at half capacity with `demand`
// (faults and evictions on every iteration) and with `ideal` (the hit path
// alone). Run: build/bench/sim_throughput_bench
#include <benchmark/benchmark.h>

#include "cli/runner/experiment.h"
#include "emu/device_presets.h"

namespace umlab::cli {
namespace {

void RunPolicy(benchmark::State& state, const char* policy, const char* capacity) {
  const DeviceConfig device = *DevicePreset("v100-pcie3");
  absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload("mlp", {}, device.compute);
  if (!program.ok()) {
    state.SkipWithError(std::string(program.status().message()).c_str());
    return;
  }
  RunRequest request;
  request.program = &*program;
  request.device = device;
  request.capacity = capacity;
  request.policy = policy;
  uint64_t accesses = 0, faults = 0;
  for (auto _ : state) {
    absl::StatusOr<RunResult> result = ExecuteRun(request);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    accesses += result->stats.page_accesses;
    faults += result->stats.faults;
  }
  state.counters["page_accesses_per_s"] =
      benchmark::Counter(static_cast<double>(accesses), benchmark::Counter::kIsRate);
  state.counters["faults_per_s"] =
      benchmark::Counter(static_cast<double>(faults), benchmark::Counter::kIsRate);
}

void BM_SimDemandHalfCapacity(benchmark::State& state) { RunPolicy(state, "demand", "0.5"); }
void BM_SimIdeal(benchmark::State& state) { RunPolicy(state, "ideal", "1.0"); }

BENCHMARK(BM_SimDemandHalfCapacity)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_SimIdeal)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace umlab::cli
