// SnuRHAC's cluster on real processes (backends/emu/uffd_cluster.h): grid
// programs on 1, 2 and 4 device processes with every read and the final
// memory checked against the sequential run; broken protocol steps caught;
// a dying device failing the run; nothing left behind.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/emu/uffd_cluster.h"
#include "core/compute_spec.h"
#include "core/grid_program.h"
#include "tests/sanitized_build.h"
#include "workloads/grid_workload.h"

#if defined(__SANITIZE_THREAD__)
#define UMLAB_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMLAB_TEST_TSAN 1
#endif
#endif
#ifdef UMLAB_TEST_TSAN
// TSan's helper thread (tsan_background_thread.cc) makes every fork a
// multi-threaded one, and the device processes start threads after it,
// which TSan refuses by default.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
#endif

namespace umlab {
namespace {

int CountEntries(const char* directory) {
  int count = 0;
  if (DIR* dir = opendir(directory)) {
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
  }
  return count;
}

int CountLines(const char* file) {
  std::ifstream in(file);
  int count = 0;
  for (std::string line; std::getline(in, line);) ++count;
  return count;
}

// What this process holds: descriptors, mappings, children. The mappings
// are only comparable once the process has run a cluster: glibc keeps the
// stacks of joined threads (up to 40 MB) and one malloc arena per thread
// that ran at once, mapped for the next. So each test takes its snapshot
// after a first run with as many devices as it will use; a run that leaks
// a mapping leaks it again after that.
// Under ASan and TSan, malloc is the sanitizer's own: it maps a region for
// each size class at that class's first use and keeps freed blocks mapped
// (ASan's quarantine held the coordinator's 64 MB reference), so there the
// count follows the allocator, not the run, and only the descriptors and
// children are compared; the plain builds compare the mappings too.
struct Holdings {
  int fds = CountEntries("/proc/self/fd");
  int maps = CountLines("/proc/self/maps");
};

void ExpectNothingLeft(const Holdings& before) {
  const Holdings after;
  EXPECT_EQ(after.fds, before.fds);
  if (!umlab::testing::kSanitized) {
    EXPECT_EQ(after.maps, before.maps);
  }
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

std::unique_ptr<GridProgram> Program(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<GridProgram>> program =
      GridWorkloads().Create(spec, ComputeSpec{});
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *std::move(program) : nullptr;
}

class SnurhacUffdTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SnurhacUffdTest, EveryReadAndTheFinalMemoryMatchTheSequentialRun) {
  std::unique_ptr<GridProgram> program = Program(GetParam());
  ASSERT_NE(program, nullptr);
  std::optional<Holdings> after_first_run;
  for (int devices : {4, 1, 2}) {  // the most threads first (Holdings says why)
    const Holdings before = after_first_run.value_or(Holdings{});
    UffdClusterOptions options;
    options.devices = devices;
    absl::StatusOr<UffdClusterResult> result = RunUffdCluster(*program, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->read_mismatches, 0u) << devices << " devices: " << result->first_mismatch;
    EXPECT_EQ(result->final_mismatches, 0u) << devices << " devices: " << result->first_mismatch;
    EXPECT_EQ(result->audit_mismatches, 0u) << devices << " devices: " << result->first_mismatch;
    EXPECT_GT(result->checked_words, 0u);
    EXPECT_GT(result->total.faults, 0u);
    EXPECT_EQ(result->devices.size(), static_cast<size_t>(devices));
    // Every page of the inputs reaches some device, from the host.
    EXPECT_GT(result->total.host_fetch_bytes, 0u);
    if (devices == 1) {
      EXPECT_EQ(result->total.peer_fetch_bytes, 0u);
      EXPECT_EQ(result->total.lock_waits, 0u);
    }
    if (after_first_run.has_value()) {
      ExpectNothingLeft(before);
    } else {
      EXPECT_EQ(Holdings{}.fds, before.fds);
      after_first_run.emplace();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, SnurhacUffdTest,
                         ::testing::Values("gemm:scale=0.001", "hotspot:scale=0.001"));

// Two arrays 64 MB apart (so that their descriptors have different owners
// on two devices), each read whole, then written half by each device, then
// read whole again: the last kernel must see the second's writes, which
// reach the device that read the other half only because the second
// kernel's end unmapped its stale copy.
// Pages each device writes of each array; small, since every fault is a
// few round trips between processes, slow on a loaded machine.
constexpr uint64_t kHalfPages = 8;

std::unique_ptr<GridProgram> ReadWriteRead() {
  auto program = std::make_unique<GridProgram>();
  program->name = "read-write-read";
  constexpr uint64_t kBytes = 2 * kHalfPages * kPageSize;
  for (int i = 0; i < 2; ++i) {
    program->arrays.push_back(GridArray{i == 0 ? "X" : "Y", i * (64ull << 20), kBytes, true, true});
  }
  auto kernel = [&](const std::string& name, uint32_t exec_id, bool write) {
    GridKernel k;
    k.name = name;
    k.exec_id = exec_id;
    k.grid = Dim3{2, 1, 1};
    k.threads = Dim3{32, 1, 1};
    for (int a = 0; a < 2; ++a) {
      GridAccess access;
      access.array = a;
      access.access = write ? AccessType::kWrite : AccessType::kRead;
      const uint64_t base = program->arrays[a].address;
      access.touched = [base, write](const GridShare& share) {
        if (!write) return std::vector<ByteRange>{{base, base + kBytes}};
        const uint64_t half = kBytes / 2;
        return std::vector<ByteRange>{{base + share.first.x * half,
                                       base + (share.first.x + share.extent.x) * half}};
      };
      k.accesses.push_back(access);
    }
    return k;
  };
  program->launches = {kernel("read_all", 1, false), kernel("write_halves", 2, true),
                       kernel("read_all", 1, false)};
  return program;
}

TEST(SnurhacUffdInjectionTest, StaleReadersAreUnmappedAtKernelEnd) {
  const std::unique_ptr<GridProgram> program = ReadWriteRead();
  UffdClusterOptions options;
  options.devices = 2;
  absl::StatusOr<UffdClusterResult> good = RunUffdCluster(*program, options);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->read_mismatches, 0u) << good->first_mismatch;
  EXPECT_EQ(good->final_mismatches, 0u) << good->first_mismatch;
  EXPECT_EQ(good->audit_mismatches, 0u) << good->first_mismatch;
  // Each device's copy of the half the other wrote, of each array.
  EXPECT_EQ(good->total.kernel_end_unmapped_pages, 2u * 2 * kHalfPages);
  EXPECT_EQ(good->total.peer_fetch_bytes, 2u * 2 * kHalfPages * kPageSize);
  EXPECT_EQ(good->total.upgrades, 2u * 2 * kHalfPages);

  const Holdings before;
  options.inject.skip_kernel_end_unmap = true;
  absl::StatusOr<UffdClusterResult> broken = RunUffdCluster(*program, options);
  ASSERT_TRUE(broken.ok()) << broken.status();
  // Each device reads the other's half from its stale copy.
  EXPECT_EQ(broken->read_mismatches, 2u * 2 * kHalfPages * kPageSize / 4);
  // The audit saw it first: the page tables still map what the directory
  // unmapped, right after the second kernel's end.
  EXPECT_GT(broken->audit_mismatches, 0u);
  EXPECT_NE(broken->first_mismatch.find("kernel 1 (write_halves), after its unmaps: device 0"),
            std::string::npos)
      << broken->first_mismatch;
  EXPECT_NE(broken->first_mismatch.find("read-only where the directory says unmapped"),
            std::string::npos)
      << broken->first_mismatch;
  ExpectNothingLeft(before);
}

TEST(SnurhacUffdInjectionTest, WritersAreDowngradedForReal) {
  const std::unique_ptr<GridProgram> program = ReadWriteRead();
  UffdClusterOptions options;
  options.devices = 2;
  options.inject.skip_downgrade = true;
  absl::StatusOr<UffdClusterResult> broken = RunUffdCluster(*program, options);
  ASSERT_TRUE(broken.ok()) << broken.status();
  // The third kernel only reads, so its launch downgrades each half's
  // writer (§6.4's read-only flag): skipped, each device's page table still
  // lets it write its half of each array, which the audit finds at the
  // kernel's barrier and again after its (empty) unmaps.
  EXPECT_EQ(broken->audit_mismatches, 2u * 2 * 2 * kHalfPages);
  EXPECT_NE(broken->first_mismatch.find("kernel 2 (read_all), at the barrier: device 0 maps page"),
            std::string::npos)
      << broken->first_mismatch;
  EXPECT_NE(broken->first_mismatch.find("read-write where the directory says read-only"),
            std::string::npos)
      << broken->first_mismatch;
}

TEST(SnurhacUffdInjectionTest, ADyingDeviceFailsTheRunInOneLine) {
  const std::unique_ptr<GridProgram> program = ReadWriteRead();
  UffdClusterOptions options;
  options.devices = 2;
  ASSERT_TRUE(RunUffdCluster(*program, options).ok());
  const Holdings before;
  options.crash_device_for_testing = true;
  absl::StatusOr<UffdClusterResult> result = RunUffdCluster(*program, options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("device 0's process was killed by signal 9"),
            std::string::npos)
      << result.status();
  EXPECT_EQ(result.status().message().find('\n'), std::string::npos);
  ExpectNothingLeft(before);
}

TEST(SnurhacUffdInjectionTest, BadOptionsAreRefused) {
  const std::unique_ptr<GridProgram> program = ReadWriteRead();
  UffdClusterOptions options;
  options.devices = 5;
  absl::StatusOr<UffdClusterResult> result = RunUffdCluster(*program, options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("1 to 4 devices"), std::string::npos);
}

}  // namespace
}  // namespace umlab
