// A program's copies on the sim (kCopy, kSync) as the two baselines HUM is
// measured against run them: `memcpy`, the program as written (DMA over
// the link into device memory), and unified memory (`demand`: the copy is
// the host's own write of the destination, and kernels fault the pages
// in). Times are worked out on the test device: 1 GB/s each way, no fixed
// costs, so 2 MiB crosses the link in 2.097152 ms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/kernel_assembler.h"
#include "policies/demand/demand.h"
#include "policies/memcpy/memcpy.h"
#include "tests/sim_harness.h"

namespace umlab::testing {
namespace {

constexpr Nanos kUs = 1000;
constexpr Nanos kBlockMove = 2097152;  // 2 MiB at 1 GB/s
// Host buffers live outside the device's range, 2 MiB apart.
constexpr uint64_t kHost = 0x700000000000ull;
uint64_t HostBuffer(int index) { return kHost + uint64_t(index) * kBlockSize; }
constexpr CopyDirection kToDevice = CopyDirection::kHostToDevice;
constexpr CopyDirection kToHost = CopyDirection::kDeviceToHost;

// A host kernel that reads or writes host buffer `index` for `compute_ns`.
void HostWork(ProgramBuilder& p, uint32_t exec_id, Nanos compute_ns, int index, bool write) {
  p.OnHost(exec_id).Begin(exec_id, compute_ns).Access(HostBuffer(index), kBlockSize, write);
  p.End(exec_id);
}

TEST(SimCopyTest, ASynchronousCopyHoldsTheHostForItsTimeOnTheLink) {
  // memcpy: block 0 is device memory (mapped when allocated, no copy). The
  // copy takes the link for 2.1 ms and the host waits; then 100 us of host
  // work, then a 10 us kernel that finds its page resident.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize);
  HostWork(p, 1, 100 * kUs, 1, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, kBlockMove + 110 * kUs);
  EXPECT_EQ(run.stats.copies, 1u);
  EXPECT_EQ(run.stats.dma_h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.copy_wait_ns, kBlockMove);
  EXPECT_EQ(run.stats.h2d_bytes, 0u);  // the DMA is not a migration
  EXPECT_EQ(run.stats.faults, 0u);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);  // cudaMalloc's mapping
}

TEST(SimCopyTest, AnAsyncCopyOverlapsHostWorkAndTheKernelWaitsForIt) {
  // The host works 1 ms while the copy runs; the kernel, after it on the
  // stream, starts when the copy is done.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize, /*async=*/true);
  HostWork(p, 1, 1000 * kUs, 1, /*write=*/true);
  p.Kernel(2, 10 * kUs, {0});
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, kBlockMove + 10 * kUs);
  EXPECT_EQ(run.stats.copy_wait_ns, kBlockMove - 1000 * kUs);
}

TEST(SimCopyTest, AHostWriteToTheSourceOfACopyUnderWayWaitsForIt) {
  // The host writes the copy's source: it waits for the copy (2.1 ms), then
  // works 100 us. A read of the source would not wait.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize, /*async=*/true);
  HostWork(p, 1, 100 * kUs, 0, /*write=*/true);
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, kBlockMove + 100 * kUs);

  ProgramBuilder reads;
  reads.Alloc(0, 1);
  reads.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize, true);
  HostWork(reads, 1, 100 * kUs, 0, /*write=*/false);
  MemcpyPolicy again;
  const SimRun read_run = RunOnSim(reads, 4, again);
  ASSERT_TRUE(read_run.status.ok()) << read_run.status;
  EXPECT_EQ(read_run.stats.copy_wait_ns, 0);
}

TEST(SimCopyTest, ASyncWaitsForEveryCopyAndCopiesKeepStreamOrder) {
  // Two async copies of 2 MiB, one each way, go one after the other (one
  // stream); the sync waits for both; then 100 us of host work.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize, true);
  p.Copy(kToHost, ProgramBuilder::BlockAddress(1), HostBuffer(1), kBlockSize, true);
  p.Sync();
  HostWork(p, 1, 100 * kUs, 2, /*write=*/true);
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, 2 * kBlockMove + 100 * kUs);
  EXPECT_EQ(run.stats.dma_h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.dma_d2h_bytes, kBlockSize);
}

TEST(SimCopyTest, TheCopyRateIsItsOwn) {
  // cudaMemcpy of pageable memory runs at its own rate: 0.5 GB/s here.
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize);
  DeviceConfig device = TestDevice();
  device.link.dma_h2d_bytes_per_second = 0.5e9;
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy, device);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.time_ns, 2 * kBlockMove);
}

TEST(SimCopyTest, MemcpyRefusesBuffersThatDoNotFit) {
  ProgramBuilder p;
  p.Alloc(0, 3);
  p.Kernel(1, 10 * kUs, {0, 1, 2});
  MemcpyPolicy policy;
  const SimRun run = RunOnSim(p, 2, policy);
  EXPECT_TRUE(IsPolicyRefusal(run.status)) << run.status;
  EXPECT_THAT(run.status.message(), ::testing::HasSubstr("cudaMalloc would fail"));
}

TEST(SimCopyTest, UnderUnifiedMemoryACopyIsTheHostsOwnAccess) {
  // demand: the copy to the device is the host writing block 0 (no time,
  // no DMA); the kernel faults it in with the host's data, not zeroes. The
  // kernel then writes block 1, and the copy back is the host reading it:
  // the dirty block is written back first.
  ProgramBuilder p;
  p.Alloc(0, 2);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), HostBuffer(0), kBlockSize);
  p.Kernel(1, 10 * kUs, {0});
  p.Kernel(2, 10 * kUs, {1}, /*write=*/true);
  p.Copy(kToHost, ProgramBuilder::BlockAddress(1), HostBuffer(1), kBlockSize);
  DemandPolicy policy;
  const SimRun run = RunOnSim(p, 4, policy);
  ASSERT_TRUE(run.status.ok()) << run.status;
  EXPECT_EQ(run.stats.copies, 2u);
  EXPECT_EQ(run.stats.dma_h2d_bytes + run.stats.dma_d2h_bytes, 0u);
  EXPECT_EQ(run.stats.h2d_bytes, kBlockSize);
  EXPECT_EQ(run.stats.zero_filled_bytes, kBlockSize);  // block 1, written first on the device
  EXPECT_EQ(run.stats.d2h_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_writeback_bytes, kBlockSize);
  EXPECT_EQ(run.stats.host_kernels, 0u);  // copies are not host kernels
}

TEST(SimCopyTest, CopiesAreCheckedOutsideKernelsAndWellFormed) {
  ProgramBuilder inside;
  inside.Begin(1, kUs);
  inside.Copy(kToDevice, ProgramBuilder::BlockAddress(0), kHost, kPageSize);
  inside.End(1);
  ProgramBuilder no_bytes;
  no_bytes.Copy(kToDevice, ProgramBuilder::BlockAddress(0), kHost, 0);
  ProgramBuilder unknown_cause;
  Event bad = CopyCommand{kToDevice, false, ProgramBuilder::BlockAddress(0), kHost, kPageSize}
                  .ToEvent();
  bad.cause = 4;
  unknown_cause.Raw(bad);
  for (const auto& [program, message] :
       {std::pair{&inside, "a copy event inside kernel 1"}, std::pair{&no_bytes, "no bytes"},
        std::pair{&unknown_cause, "cause 4"}}) {
    VectorSource source = program->Source();
    KernelAssembler assembler(source);
    while (assembler.Next()) {
    }
    EXPECT_THAT(assembler.status().message(), ::testing::HasSubstr(message));
  }
}

TEST(SimCopyTest, OnlyTheBatchedFaultModelWithThePolicyInTheDriverRunsCopies) {
  ProgramBuilder p;
  p.Alloc(0, 1);
  p.Copy(kToDevice, ProgramBuilder::BlockAddress(0), kHost, kPageSize);
  DemandPolicy policy;
  SimOptions options;
  options.policy_from_user = true;
  const SimRun run = RunOnSim(p, 4, policy, TestDevice(), ReplayPolicy::kBatch, options);
  EXPECT_THAT(run.status.message(), ::testing::HasSubstr("copies between host and device"));
}

}  // namespace
}  // namespace umlab::testing
