// The cuda backend on a real GPU. Skips, saying why, where the backend is
// not built or no GPU is visible (CI); runs on the device machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

// Built with or without the cuda backend; the header is there only with it.
#if __has_include(<cuda_runtime_api.h>)
#include <cuda_runtime_api.h>
#define UMLAB_HAVE_CUDA_RUNTIME 1
#endif

// The backend's own header, for what only it reports (host kernels' touches).
#if __has_include("backends/cuda/cuda_backend.h")
#include "backends/cuda/cuda_backend.h"
#define UMLAB_HAVE_CUDA_BACKEND 1
#endif

#include "absl/strings/str_split.h"
#include "cli/runner/experiment.h"
#include "core/backend_registry.h"
#include "core/engine.h"
#include "emu/device_presets.h"
#include "tests/program_builder.h"
#include "tests/scripted_moves.h"

namespace umlab::cli {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Backends().Find("cuda") == nullptr) {
      GTEST_SKIP() << "the cuda backend is not built (no CUDA toolkit at configure time)";
    }
    absl::StatusOr<std::unique_ptr<Backend>> probe =
        Backends().Create("cuda", *DevicePreset("h200"), 1);
    if (!probe.ok()) GTEST_SKIP() << "no usable GPU: " << probe.status().message();
    device_ = *DevicePreset("h200");
    absl::StatusOr<ProgramInput> program = ProgramInput::FromWorkload(
        "mlp", {"layers=2,hidden=1024,batch=512,iterations=3"}, device_.compute);
    ASSERT_TRUE(program.ok()) << program.status();
    program_.emplace(std::move(*program));
  }

  absl::StatusOr<RunResult> Run(const std::string& policy, const std::string& capacity,
                                const std::string& backend = "cuda") {
    RunRequest request;
    request.program = &*program_;
    request.device = device_;
    request.capacity = capacity;
    request.policy = policy;
    request.backend = backend;
    return ExecuteRun(request);
  }

  static uint64_t FreeGpuBytes() {
    size_t free_bytes = 0;
#ifdef UMLAB_HAVE_CUDA_RUNTIME
    size_t total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
#endif
    return free_bytes;
  }

  DeviceConfig device_;
  std::optional<ProgramInput> program_;
};

TEST_F(CudaBackendTest, TheDriverRunsOutOfMemoryUnderTheBalloon) {
  const uint64_t free_before = FreeGpuBytes();
  absl::StatusOr<RunResult> result = Run("demand", "0.5");
  ASSERT_TRUE(result.ok()) << result.status();
  const RunStats& s = result->stats;
  EXPECT_EQ(result->backend, "cuda");
  EXPECT_GT(s.faults, 0u);
  EXPECT_GT(s.fault_records, 0u);
  EXPECT_GT(s.faulted_blocks, 0u);
  EXPECT_GT(s.h2d_bytes, 0u);
  EXPECT_GT(s.d2h_bytes, 0u);           // evictions wrote back
  // The driver's own counters miss nothing CUPTI's records have.
  EXPECT_GE(s.uvm_h2d_bytes, s.h2d_bytes);
  EXPECT_GE(s.uvm_d2h_bytes, s.d2h_bytes);
  EXPECT_GT(s.device_evictions, 0u);    // the driver evicted by itself
  EXPECT_GE(s.time_ns, s.ideal_time_ns);  // the kernels really computed
  EXPECT_EQ(s.kernels, program_->summary().kernels);
  ASSERT_EQ(s.per_iteration.size(), 3u);
  // The balloon and the managed memory went with the run.
  EXPECT_GE(FreeGpuBytes() + (64u << 20), free_before);
}

// The engine hears the driver's transfers from umlab's own event queue,
// which loses none, where CUPTI's records lose some while deepum pre-evicts
// (docs/fidelity.md, "CUPTI's missing write-backs").
TEST_F(CudaBackendTest, TheEngineHearsEveryTransferTheDriverCounts) {
  absl::StatusOr<RunResult> result = Run("deepum", "0.5");
  ASSERT_TRUE(result.ok()) << result.status();
  const RunStats& s = result->stats;
  ASSERT_GT(s.uvm_h2d_bytes, 0u) << "the driver's counters could not be read";
  ASSERT_GT(s.pre_evictions, 0u);
  EXPECT_EQ(s.dropped_records, 0u);
  // Both count from the queue's opening to the last calls' end; what tells
  // them apart is a transfer on either side of a reading (this program
  // moves tens of blocks, so a block is a few percent of it).
  const auto margin = [](uint64_t bytes) {
    return std::max(0.01 * double(bytes), double(kBlockSize));
  };
  EXPECT_NEAR(double(s.h2d_bytes), double(s.uvm_h2d_bytes), margin(s.uvm_h2d_bytes));
  EXPECT_NEAR(double(s.d2h_bytes), double(s.uvm_d2h_bytes), margin(s.uvm_d2h_bytes));
  EXPECT_LE(double(s.unrecorded_d2h_bytes), margin(s.d2h_bytes));
}

// With fault_records=uvm the engine hears of faults from the driver's
// queue, one event per fault serviced: at least as many as CUPTI's groups
// count, and every block the driver served is heard of, so the run ends
// with the books and the driver agreeing on the traffic as before.
TEST_F(CudaBackendTest, TheEngineHearsEveryFaultTheDriverServices) {
  absl::StatusOr<RunResult> result = Run("deepum", "0.5", "cuda:fault_records=uvm");
  ASSERT_TRUE(result.ok()) << result.status();
  const RunStats& s = result->stats;
  ASSERT_GT(s.uvm_h2d_bytes, 0u) << "the driver's tools device could not be read";
  EXPECT_EQ(s.dropped_records, 0u);
  EXPECT_GT(s.fault_records, 0u);  // CUPTI's, still counted
  EXPECT_GE(s.fault_events, s.fault_records);
  EXPECT_GT(s.faulted_blocks, 0u);
  EXPECT_GT(s.pre_evictions, 0u);
  EXPECT_NEAR(double(s.h2d_bytes), double(s.uvm_h2d_bytes),
              std::max(0.01 * double(s.uvm_h2d_bytes), double(kBlockSize)));
}

TEST_F(CudaBackendTest, TheCallLogHasARowForEveryCallInTheOrderIssued) {
  const std::string path = ::testing::TempDir() + "/cuda_calls.csv";
  absl::StatusOr<RunResult> result = Run("deepum", "0.5", "cuda:calls=" + path);
  ASSERT_TRUE(result.ok()) << result.status();
  std::ifstream log(path);
  std::string line;
  ASSERT_TRUE(std::getline(log, line));
  EXPECT_EQ(line.substr(0, 8), "id,kind,") << line;
  int prefetches = 0, evictions = 0;
  long long last_end = -1;
  uint64_t prefetched_bytes = 0;
  while (std::getline(log, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    ASSERT_EQ(f.size(), 10u) << line;
    prefetches += f[1] == "prefetch";
    evictions += f[1] == "evict";
    if (f[1] == "prefetch") prefetched_bytes += std::stoull(f[6]);
    const long long submitted = std::stoll(f[7]), begin = std::stoll(f[8]), end = std::stoll(f[9]);
    // One thread issues in submission order: each call begins after it was
    // submitted and after the one before it ended.
    EXPECT_LE(submitted, begin) << line;
    EXPECT_LE(begin, end) << line;
    EXPECT_GE(begin, last_end) << line;
    last_end = end;
  }
  EXPECT_GT(prefetches, 0);
  EXPECT_GT(evictions, 0);
  // The calls name the managed memory of what the engine prefetched, and a
  // block's spans cover only what its segments hold of it.
  EXPECT_GT(prefetched_bytes, 0u);
  EXPECT_LE(prefetched_bytes, result->stats.prefetch_bytes);
  std::remove(path.c_str());
}

TEST_F(CudaBackendTest, TheEngineBudgetEvictsWithoutABalloon) {
  absl::StatusOr<RunResult> result = Run("demand", "0.5", "cuda:memory=engine");
  ASSERT_TRUE(result.ok()) << result.status();
  const RunStats& s = result->stats;
  EXPECT_GT(s.evictions, 0u);           // the budget was enforced
  EXPECT_EQ(s.device_evictions, 0u);    // the GPU never ran out
}

TEST_F(CudaBackendTest, FullCapacityNeedsNoEvictions) {
  for (const char* backend : {"cuda", "cuda:memory=engine"}) {
    absl::StatusOr<RunResult> result = Run("demand", "1.0", backend);
    ASSERT_TRUE(result.ok()) << backend << ": " << result.status();
    EXPECT_EQ(result->stats.evictions, 0u) << backend;
    EXPECT_GT(result->stats.launch_ns, 0) << backend;
  }
}

TEST_F(CudaBackendTest, RefusesAnUnknownMemoryMode) {
  absl::StatusOr<RunResult> result = Run("demand", "0.5", "cuda:memory=gpu");
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()),
              ::testing::HasSubstr("memory=gpu is not one of: driver, engine"));
}

TEST_F(CudaBackendTest, RefusesMoreManagedMemoryThanItMayUse) {
  // About 275 GB of parameters: more than half of the host and than the GPU.
  absl::StatusOr<ProgramInput> huge = ProgramInput::FromWorkload(
      "mlp", {"layers=64,hidden=32768,batch=8192,iterations=1"}, device_.compute);
  ASSERT_TRUE(huge.ok()) << huge.status();
  const std::pair<const char*, const char*> cases[] = {
      {"cuda", "half of the host's memory"}, {"cuda:memory=engine", "of the GPU is free"}};
  for (const auto& [backend, message] : cases) {
    RunRequest request;
    request.program = &*huge;
    request.device = device_;
    request.backend = backend;
    absl::StatusOr<RunResult> result = ExecuteRun(request);
    ASSERT_FALSE(result.ok()) << backend;
    EXPECT_THAT(std::string(result.status().message()), ::testing::HasSubstr(message));
  }
}

TEST_F(CudaBackendTest, RemotelyMappedBlocksAreReadWhereTheyAreWithoutMigrating) {
  // Kernel 1 computes for 50 ms and touches nothing; at its start the
  // policy maps blocks 0 to 7 remotely. Kernel 2 reads them: the GPU
  // reaches them in host memory, so the driver migrates nothing (CUPTI's
  // h2d stays zero) and nothing faults.
  using ::umlab::testing::ProgramBuilder;
  using ::umlab::testing::ScriptedMoves;
  constexpr int kBlocks = 8;
  ProgramBuilder program;
  program.Alloc(0, kBlocks);
  program.Kernel(1, 50000000, {});
  std::vector<int> all;
  for (int b = 0; b < kBlocks; ++b) all.push_back(b);
  program.Kernel(2, 10000, all);
  ScriptedMoves policy;
  policy.At(1, [](PolicyContext& context) {
    for (int b = 0; b < kBlocks; ++b) {
      context.MapRemote(BlockOfAddress(ProgramBuilder::BlockAddress(b)), FullPageMask());
    }
  });
  for (const char* backend_spec : {"cuda", "cuda:memory=engine"}) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        Backends().Create(backend_spec, device_, 2 * kBlocks);
    ASSERT_TRUE(backend.ok()) << backend.status();
    ASSERT_TRUE((*backend)->MapsRemotely());
    Engine engine(**backend, policy, 2 * kBlocks, EngineConfigFor(device_));
    ::umlab::testing::VectorSource source = program.Source();
    ASSERT_TRUE((*backend)->Run(source, engine, nullptr).ok()) << backend_spec;
    const RunStats& s = engine.stats();
    EXPECT_EQ(s.remote_mapped_bytes, kBlocks * kBlockSize) << backend_spec;
    EXPECT_EQ(s.remote_read_bytes, kBlocks * kBlockSize) << backend_spec;
    EXPECT_EQ(s.h2d_bytes, 0u) << backend_spec;
    EXPECT_EQ(s.faulted_blocks, 0u) << backend_spec;
  }
}

#ifdef UMLAB_HAVE_CUDA_BACKEND
TEST_F(CudaBackendTest, HostKernelsReadWhatTheGpuWroteAndTheGpuReadsWhatTheyWrote) {
  // Kernel 1 writes blocks 0 to 7 on the GPU (each page's first word 0 ->
  // 1); host kernel 2 reads them: the pages come back to the host and the
  // CPU finds 1 in every page. Kernel 3 writes them again on the GPU (2),
  // host kernel 4 writes them on the CPU (3), kernel 5 reads them on the
  // GPU, and host kernel 6 reads 3 in every page: what the CPU wrote went
  // to the GPU and back. Any stale word fails the run ("stale data").
  using ::umlab::testing::ProgramBuilder;
  using ::umlab::testing::ScriptedMoves;
  constexpr int kBlocks = 8;
  constexpr uint64_t kPages = uint64_t{kBlocks} * kPagesPerBlock;
  std::vector<int> all;
  for (int b = 0; b < kBlocks; ++b) all.push_back(b);
  ProgramBuilder program;
  program.Alloc(0, kBlocks);
  program.Kernel(1, 100000, all, /*write=*/true);
  program.OnHost(2).Kernel(2, 1000000, all);
  program.Kernel(3, 100000, all, /*write=*/true);
  program.OnHost(4).Kernel(4, 1000000, all, /*write=*/true);
  program.Kernel(5, 100000, all);
  program.OnHost(6).Kernel(6, 1000000, all);
  for (const char* backend_spec : {"cuda", "cuda:memory=engine"}) {
    absl::StatusOr<std::unique_ptr<Backend>> backend =
        Backends().Create(backend_spec, device_, 2 * kBlocks);
    ASSERT_TRUE(backend.ok()) << backend.status();
    ScriptedMoves policy;  // demand's decisions
    Engine engine(**backend, policy, 2 * kBlocks, EngineConfigFor(device_));
    ::umlab::testing::VectorSource source = program.Source();
    const absl::Status status = (*backend)->Run(source, engine, nullptr);
    ASSERT_TRUE(status.ok()) << backend_spec << ": " << status;
    const RunStats& s = engine.stats();
    EXPECT_EQ(s.kernels, 6u) << backend_spec;
    EXPECT_EQ(s.host_kernels, 3u) << backend_spec;
    // Every page the CPU read was checked against the writes before it.
    const auto* cuda_backend = dynamic_cast<const cuda::CudaBackend*>(backend->get());
    ASSERT_NE(cuda_backend, nullptr);
    const cuda::CudaBackend::HostTouches touches = cuda_backend->host_touches();
    EXPECT_EQ(touches.pages_read, 2 * kPages) << backend_spec;
    EXPECT_EQ(touches.pages_checked, 2 * kPages) << backend_spec;
    EXPECT_EQ(touches.pages_written, kPages) << backend_spec;
    // The GPU's words reached the host: written back by the engine's
    // prefetch to the host (memory=engine, once it has heard of the
    // faults), or migrated by the driver at the CPU's touch; CUPTI counts
    // both.
    EXPECT_GE(std::max(s.host_writeback_bytes, s.d2h_bytes), kBlocks * kBlockSize)
        << backend_spec;
    // The pages went back to the GPU (for kernels 3 and 5).
    EXPECT_GE(s.h2d_bytes, kBlocks * kBlockSize) << backend_spec;
    // The host kernels' CPU time is in the run.
    EXPECT_GE(s.time_ns, 3 * 1000000) << backend_spec;
  }
}
#endif

}  // namespace
}  // namespace umlab::cli
