// SnuRHAC's multi-device run (emu/snurhac/cluster_sim.h) on programs small
// enough to follow by hand: every time below is worked out in the comment
// above its check, from the model's rules and these round numbers:
//  - each device's PCIe link: 1 GB/s each way (a 4 KiB page in 4096 ns)
//    and 1000 ns per transfer; one issuer per device; 10 us from a fault
//    batch's fetch to its protocol's start;
//  - the network: 1 GB/s per node's port, 500 ns per message or transfer;
//  - the host copies 1 byte per ns into its UM space.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/grid_program.h"
#include "core/policy.h"
#include "emu/snurhac/cluster_sim.h"

namespace umlab::snurhac {
namespace {

ClusterConfig HandConfig(int devices, int devices_per_node) {
  ClusterConfig config;
  config.devices = devices;
  config.devices_per_node = devices_per_node;
  config.device.link = LinkConfig{1e9, 1e9, 1000};
  config.device.compute.sm_count = 1;
  config.device.warps_per_sm = 1;
  config.device.fault_latency_ns = 10000;
  config.device.fault_buffer_entries = 64;
  config.network = NetworkConfig{1e9, 500};
  config.host_copy_bytes_per_second = 1e9;
  config.check_invariants = true;
  return config;
}

DevicePolicyFactory Demand() {
  return [](int) { return Policies().Create("demand"); };
}

AffineTerm BlockX(int64_t coefficient) { return {IndexVariable::kBlockX, coefficient, 0}; }
AffineTerm ThreadX(int64_t coefficient) { return {IndexVariable::kThreadX, coefficient, 0}; }

// `array`'s page `b` for block b (1024 fp32 elements a page), or with
// `other` the page of the other of two blocks.
GridAccess PagePerBlock(int array, AccessType access, bool other = false) {
  GridAccess a;
  a.array = array;
  a.access = access;
  a.element_bytes = 4;
  a.affine = other ? AffineIndex{1024, {BlockX(-1024), ThreadX(1)}}
                   : AffineIndex{0, {BlockX(1024), ThreadX(1)}};
  return a;
}

GridKernel TwoBlockKernel(uint32_t exec_id, std::vector<GridAccess> accesses) {
  GridKernel kernel;
  kernel.name = absl::StrCat("k", exec_id);
  kernel.exec_id = exec_id;
  kernel.grid = Dim3{2, 1, 1};
  kernel.threads = Dim3{1024, 1, 1};
  kernel.compute_ns = 2000;  // 1000 ns for each device's one block
  kernel.accesses = std::move(accesses);
  return kernel;
}

// One array of two pages, copied in.
GridProgram TwoPages() {
  GridProgram program;
  program.name = "two pages";
  GridArrayLayout(program).Add("a", 2 * kPageSize, /*copied_in=*/true, /*copied_out=*/false);
  return program;
}

TEST(SnurhacClusterTest, EachDeviceFetchesItsPageFromTheHost) {
  GridProgram program = TwoPages();
  program.launches = {TwoBlockKernel(1, {PagePerBlock(0, AccessType::kRead)})};
  absl::StatusOr<ClusterResult> result = RunCluster(program, HandConfig(2, 1), Demand());
  ASSERT_TRUE(result.ok()) << result.status();
  // Copy-in: 8192 bytes at 1 byte/ns, so the kernel launches at 8192.
  EXPECT_EQ(result->copy_in_ns, 8192);
  // Device 0, on the host node, faults on page 0 at 8192; its protocol
  // starts at 18192 with no messages to pay (block 0's descriptor is its
  // own) and the host's copy crosses its link in 1000 + 4096 ns: mapped at
  // 23288, replayed, 1000 ns of compute: done at 24288.
  // Device 1, on node 1, hears of the launch at 8692 and faults on page 1,
  // in the same block. From 18692 its lock request takes 500 ns to node 0,
  // where device 0 holds the block's lock until 23288: the grant reaches
  // device 1 at 23788; the fault list and the reply naming the host take
  // 1000 ns (24788), the page request 500 (25288), node 0's port 500 + 4096
  // (29884), its link 5096: mapped at 34980, done at 35980. Its unlock
  // reaches node 0 at 35480. The kernel's synchronisation crosses the
  // network: 36480.
  EXPECT_EQ(result->kernels_ns, 36480 - 8192);
  EXPECT_EQ(result->time_ns, 36480);
  EXPECT_EQ(result->devices[0].busy_ns, 24288 - 8192);
  EXPECT_EQ(result->devices[1].busy_ns, 35980 - 8192);
  EXPECT_EQ(result->devices[0].lock_waits, 0u);
  EXPECT_EQ(result->devices[1].lock_waits, 1u);
  for (const ClusterDeviceStats& device : result->devices) {
    EXPECT_EQ(device.faults, 1u);
    EXPECT_EQ(device.host_fetch_bytes, kPageSize);
    EXPECT_EQ(device.peer_fetch_bytes, 0u);
  }
  EXPECT_EQ(result->network_bytes, kPageSize);  // device 1's page only
  EXPECT_EQ(result->single_device_kernels, 0);
  EXPECT_GT(result->invariant_checks, 0u);
}

TEST(SnurhacClusterTest, WritersServeTheirPeersAndKernelEndUnmapsTheReaders) {
  GridProgram program = TwoPages();
  program.arrays[0].copied_out = true;
  program.launches = {
      TwoBlockKernel(1, {PagePerBlock(0, AccessType::kWrite)}),
      TwoBlockKernel(2, {PagePerBlock(0, AccessType::kWrite),
                         PagePerBlock(0, AccessType::kRead, /*other=*/true)}),
  };
  absl::StatusOr<ClusterResult> result = RunCluster(program, HandConfig(2, 1), Demand());
  ASSERT_TRUE(result.ok()) << result.status();
  // Kernel 1 is the previous test's with write faults: it ends at 36480,
  // device 0 writing page 0 and device 1 page 1.
  // Kernel 2: each device writes its own page (a hit) and reads the other's,
  // 500 ns of compute after each access.
  // Device 0 reads page 1 at 36980 and faults; from 46980 it holds block
  // 0's lock (its own descriptor) and the reply names device 1, the page's
  // writer; the request reaches node 1 at 47480; device 1's link out (5096:
  // 52576), node 1's port (4596: 57172), device 0's link in (5096: 62268);
  // replayed, done at 62768.
  // Device 1 hears of the launch at 36980, reads page 0 at 37480 and
  // faults; from 47480 its lock request waits at node 0 for device 0's
  // unlock (62268): granted at 62768, fault list and reply (63768), the
  // request to device 0 (64268), its link out (69364), node 0's port
  // (73960), device 1's link in (79056); done at 79556, when its unlock
  // reaches node 0 too. Synchronisation: 80056. Each reader's copy is
  // unmapped there, the other device being the page's writer.
  EXPECT_EQ(result->copy_in_ns + result->kernels_ns, 80056);
  for (const ClusterDeviceStats& device : result->devices) {
    EXPECT_EQ(device.peer_fetch_bytes, kPageSize);
    EXPECT_EQ(device.kernel_end_unmapped_pages, 1u);
  }
  // The copy-out: each device gives up the page it writes. Device 0 locks
  // block 0 at once, writes page 0 back over its link (85152) and unlocks;
  // device 1's request has waited since 80556: the grant reaches it at
  // 85652, its eviction notice and the reply take 1000 ns (86652), then
  // its link out (91748) and node 1's port to the host (96344); its unlock
  // arrives at 96844. The host then copies the 8192 bytes out: 105036.
  EXPECT_EQ(result->time_ns, 105036);
  EXPECT_EQ(result->copy_out_ns, 105036 - 80056);
  // Device 1 waited for block 0's lock in each kernel and in the copy-out.
  EXPECT_EQ(result->devices[1].lock_waits, 3u);
  EXPECT_EQ(result->total.write_back_bytes, 2 * kPageSize);
  // Network: kernel 1's host page to device 1, kernel 2's two peer pages,
  // device 1's write-back.
  EXPECT_EQ(result->network_bytes, 4 * kPageSize);
}

TEST(SnurhacClusterTest, ADeviceOutOfFramesWritesItsVictimBack) {
  GridProgram program;
  program.name = "two arrays, one frame";
  GridArrayLayout layout(program);
  layout.Add("a", kPageSize, true, false);
  layout.Add("b", kPageSize, true, false);
  GridKernel kernel;
  kernel.name = "write a, read b";
  kernel.exec_id = 1;
  kernel.grid = Dim3{1, 1, 1};
  kernel.threads = Dim3{1024, 1, 1};
  kernel.compute_ns = 2000;
  GridAccess write_a = PagePerBlock(0, AccessType::kWrite);
  GridAccess read_b = PagePerBlock(1, AccessType::kRead);
  kernel.accesses = {write_a, read_b};
  program.launches = {kernel};
  ClusterConfig config = HandConfig(1, 1);
  config.capacity_frames = 1;
  absl::StatusOr<ClusterResult> result = RunCluster(program, config, Demand());
  ASSERT_TRUE(result.ok()) << result.status();
  // Copy-in 8192. Page a faults at 8192, arrives at 23288 (10000 + 5096);
  // the write and 1000 ns of compute: b faults at 24288. From 34288 the
  // only frame is a's: a is evicted (it was written: 5096 ns out, 39384),
  // then b comes in (44480), 1000 ns of compute: 45480, one node.
  EXPECT_EQ(result->time_ns, 45480);
  EXPECT_EQ(result->devices[0].evictions, 1u);
  EXPECT_EQ(result->devices[0].write_back_bytes, kPageSize);
  EXPECT_EQ(result->devices[0].peak_frames, 1u);
}

TEST(SnurhacClusterTest, AtomicsSendAKernelToOneDevice) {
  GridProgram program = TwoPages();
  program.launches = {TwoBlockKernel(1, {PagePerBlock(0, AccessType::kAtomic)})};
  absl::StatusOr<ClusterResult> result = RunCluster(program, HandConfig(2, 1), Demand());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->single_device_kernels, 1);
  // Device 0 runs both blocks: its one issuer faults on page 0, then on 1.
  EXPECT_EQ(result->devices[0].faults, 2u);
  EXPECT_EQ(result->devices[0].host_fetch_bytes, 2 * kPageSize);
  EXPECT_EQ(result->devices[1].faults, 0u);
}

TEST(SnurhacClusterTest, OverlappingWriteRangesSendAKernelToOneDevice) {
  GridProgram program = TwoPages();
  GridAccess shared;  // every block writes both pages
  shared.array = 0;
  shared.access = AccessType::kWrite;
  shared.affine = AffineIndex{0, {{IndexVariable::kLoop, 1, 2048}}};
  program.launches = {TwoBlockKernel(1, {shared})};
  absl::StatusOr<ClusterResult> result = RunCluster(program, HandConfig(2, 2), Demand());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->single_device_kernels, 1);
  EXPECT_EQ(result->devices[1].faults, 0u);
}

// A program with sharing, halos and several kernels on four devices, with
// too few frames, every prefetcher on, and the coherence audit after every
// step: it runs through, and twice the same.
GridProgram Stencil() {
  GridProgram program;
  program.name = "stencil";
  GridArrayLayout layout(program);
  const uint64_t side = 1024;  // 1024 x 1024 fp32: 4 MiB an array
  const int arrays[2] = {layout.Add("t0", side * side * 4, true, false),
                         layout.Add("t1", side * side * 4, false, true)};
  const int64_t n = static_cast<int64_t>(side);
  for (int k = 0; k < 4; ++k) {
    GridKernel kernel;
    kernel.name = absl::StrCat("sweep", k % 2);
    kernel.exec_id = static_cast<uint32_t>(1 + k % 2);
    kernel.grid = Dim3{1, static_cast<uint32_t>(side / 16), 1};
    kernel.threads = Dim3{1024, 16, 1};
    kernel.compute_ns = 200000;
    GridAccess read;  // rows 16 by - 1 .. 16 by + 16: a halo row each side
    read.array = arrays[k % 2];
    read.affine = AffineIndex{-n,
                              {{IndexVariable::kBlockY, 16 * n, 0},
                               {IndexVariable::kLoop, n, 18},
                               {IndexVariable::kThreadX, 1, 0}}};
    GridAccess write;
    write.array = arrays[1 - k % 2];
    write.access = AccessType::kWrite;
    write.affine = AffineIndex{0,
                               {{IndexVariable::kBlockY, 16 * n, 0},
                                {IndexVariable::kThreadY, n, 0},
                                {IndexVariable::kThreadX, 1, 0}}};
    kernel.accesses = {read, write};
    program.launches.push_back(kernel);
  }
  return program;
}

TEST(SnurhacClusterTest, TheAuditHoldsUnderEveryPrefetcherAndMemoryPressure) {
  const GridProgram program = Stencil();
  ClusterConfig config = HandConfig(4, 2);
  config.device.compute.sm_count = 8;
  config.capacity_frames = 2;  // of the 2 x 2 MiB a device's band spans
  config.static_prefetch = true;
  config.adjacent_prefetch = true;
  const DevicePolicyFactory correlation = [](int) {
    return Policies().Create("snurhac-correlation:rows=1024");
  };
  absl::StatusOr<ClusterResult> first = RunCluster(program, config, correlation);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_GT(first->invariant_checks, 1000u);
  EXPECT_GT(first->total.evictions, 0u);
  EXPECT_GT(first->total.peer_fetch_bytes, 0u);  // halos from the neighbours
  EXPECT_GT(first->total.static_prefetch_bytes, 0u);
  // Evicted pages fault again in the order they did before: the
  // correlation table has something to predict.
  EXPECT_GT(first->total.policy_prefetch_bytes, 0u);
  absl::StatusOr<ClusterResult> second = RunCluster(program, config, correlation);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->time_ns, second->time_ns);
  EXPECT_EQ(first->total.faults, second->total.faults);
  EXPECT_EQ(first->total.peer_fetch_bytes, second->total.peer_fetch_bytes);
  EXPECT_EQ(first->network_bytes, second->network_bytes);
}

TEST(SnurhacClusterTest, StaticPrefetchingTakesFaultsAway) {
  const GridProgram program = Stencil();
  ClusterConfig config = HandConfig(4, 4);
  config.device.compute.sm_count = 8;
  config.check_invariants = false;
  absl::StatusOr<ClusterResult> demand = RunCluster(program, config, Demand());
  config.static_prefetch = true;
  absl::StatusOr<ClusterResult> prefetched = RunCluster(program, config, Demand());
  ASSERT_TRUE(demand.ok() && prefetched.ok());
  EXPECT_LT(prefetched->total.faults * 2, demand->total.faults);
  EXPECT_LT(prefetched->time_ns, demand->time_ns);
}

TEST(SnurhacClusterTest, RefusesRequestsItDoesNotCarryOut) {
  GridProgram program = TwoPages();
  program.launches = {TwoBlockKernel(1, {PagePerBlock(0, AccessType::kRead)})};
  ClusterConfig config = HandConfig(2, 1);
  config.devices = 33;
  EXPECT_FALSE(RunCluster(program, config, Demand()).ok());
  config.devices = 2;
  program.launches[0].accesses[0].affine.reset();  // no truth at all
  EXPECT_FALSE(RunCluster(program, config, Demand()).ok());
}

}  // namespace
}  // namespace umlab::snurhac
