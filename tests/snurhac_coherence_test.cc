// SnuRHAC's coherence directory, one rule of the DeepUM thesis (§6.3, §6.4)
// at a time. snurhac_model_check_test explores how the rules interleave.
#include "emu/snurhac/coherence_directory.h"

#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "emu/snurhac/descriptor_owner.h"

namespace umlab::snurhac {
namespace {

constexpr BlockNumber kBlock = 5;

PageMask Pages(std::initializer_list<int> pages) {
  PageMask mask;
  for (int page : pages) mask.set(page);
  return mask;
}

// Steps 4 to 11 for one device's faults on kBlock, with the lock free.
FaultPlan Service(CoherenceDirectory& directory, int device, const FaultedPages& pages) {
  absl::StatusOr<LockReply> lock = directory.RequestLock(device, kBlock);
  EXPECT_TRUE(lock.ok() && *lock == LockReply::kGranted);
  absl::StatusOr<FaultPlan> plan = directory.ResolveFaults(device, kBlock, pages);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(directory.Unlock(device, kBlock).ok());
  return plan.ok() ? *plan : FaultPlan{};
}

FaultPlan Read(CoherenceDirectory& directory, int device, int page) {
  return Service(directory, device, FaultedPages{Pages({page}), PageMask()});
}

FaultPlan Write(CoherenceDirectory& directory, int device, int page) {
  return Service(directory, device, FaultedPages{PageMask(), Pages({page})});
}

const BlockDescriptor& Descriptor(const CoherenceDirectory& directory) {
  const BlockDescriptor* descriptor = directory.Find(kBlock);
  EXPECT_NE(descriptor, nullptr);
  return *descriptor;
}

TEST(DescriptorOwnerTest, DealsDescriptorsThirtyTwoBlocksAtATime) {
  EXPECT_EQ(DescriptorOwner(0, 4), 0);
  EXPECT_EQ(DescriptorOwner(31, 4), 0);
  EXPECT_EQ(DescriptorOwner(32, 4), 1);
  EXPECT_EQ(DescriptorOwner(63, 4), 1);
  EXPECT_EQ(DescriptorOwner(127, 4), 3);
  EXPECT_EQ(DescriptorOwner(128, 4), 0);
  EXPECT_EQ(DescriptorOwner(96, 3), 0);
  EXPECT_EQ(DescriptorOwner(1000, 1), 0);
}

TEST(CoherenceDirectoryTest, PlanNamesTheDescriptorOwner) {
  CoherenceDirectory directory(3);
  ASSERT_TRUE(directory.RequestLock(0, 40).ok());
  absl::StatusOr<FaultPlan> plan = directory.ResolveFaults(0, 40, FaultedPages{Pages({0}), {}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->descriptor_owner, 1);
  EXPECT_EQ(plan->device, 0);
  EXPECT_EQ(plan->block, 40u);
}

TEST(CoherenceDirectoryTest, FirstReadFetchesFromTheHostAndMapsReadOnly) {
  CoherenceDirectory directory(2);
  EXPECT_EQ(directory.NewestCopyHolder(FirstPageOfBlock(kBlock) + 3), kHost);
  const FaultPlan plan = Read(directory, 1, 3);
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{kHost, Pages({3})}}));
  EXPECT_TRUE(plan.downgrades.empty());
  EXPECT_EQ(plan.map_read, Pages({3}));
  EXPECT_TRUE(plan.map_write.none());
  EXPECT_EQ(Descriptor(directory).read_masks[1], Pages({3}));
  EXPECT_TRUE(Descriptor(directory).write_masks[1].none());
}

TEST(CoherenceDirectoryTest, ReadFaultFetchesFromTheWriterAndLeavesItWriting) {
  CoherenceDirectory directory(3);
  Write(directory, 0, 7);
  const FaultPlan plan = Read(directory, 2, 7);
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{0, Pages({7})}}));
  EXPECT_TRUE(plan.downgrades.empty());
  EXPECT_EQ(Descriptor(directory).write_masks[0], Pages({7}));
  EXPECT_EQ(Descriptor(directory).read_masks[2], Pages({7}));
  EXPECT_EQ(directory.NewestCopyHolder(FirstPageOfBlock(kBlock) + 7), 0);
}

// The host's UM space still holds an unwritten page's data: one link away,
// where a reader's copy is two.
TEST(CoherenceDirectoryTest, UnwrittenPageIsServedByTheHostEvenWithReaders) {
  CoherenceDirectory directory(3);
  Read(directory, 2, 1);
  Read(directory, 1, 1);
  const FaultPlan plan = Read(directory, 0, 1);
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{kHost, Pages({1})}}));
}

// A page written in an earlier kernel whose writer became a reader (the
// read-only flag): the host's copy is old, the readers' are the newest.
TEST(CoherenceDirectoryTest, PageNewerThanTheHostsIsServedByTheLowestNumberedReader) {
  CoherenceDirectory directory(3);
  Write(directory, 2, 1);
  Read(directory, 1, 1);
  ASSERT_TRUE(directory.EndKernel().ok());  // device 1's stale copy is unmapped
  Read(directory, 1, 1);
  ASSERT_TRUE(directory.SetReadOnly(kBlock, true).ok());  // device 2 is a reader now
  const FaultPlan plan = Read(directory, 0, 1);
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{1, Pages({1})}}));
}

TEST(CoherenceDirectoryTest, WriteFaultDowngradesThePreviousWriter) {
  CoherenceDirectory directory(3);
  Write(directory, 0, 9);
  const FaultPlan plan = Write(directory, 1, 9);
  EXPECT_EQ(plan.downgrades, (std::vector<Downgrade>{{0, kBlock, Pages({9})}}));
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{0, Pages({9})}}));
  EXPECT_EQ(plan.map_write, Pages({9}));
  const BlockDescriptor& descriptor = Descriptor(directory);
  // The old writer keeps its mapping, read-only; the new one has both bits.
  EXPECT_TRUE(descriptor.write_masks[0].none());
  EXPECT_EQ(descriptor.read_masks[0], Pages({9}));
  EXPECT_EQ(descriptor.write_masks[1], Pages({9}));
  EXPECT_EQ(descriptor.read_masks[1], Pages({9}));
}

TEST(CoherenceDirectoryTest, WriteFaultLeavesReadersMapped) {
  CoherenceDirectory directory(3);
  Read(directory, 0, 2);
  Read(directory, 1, 2);
  const FaultPlan plan = Write(directory, 2, 2);
  EXPECT_TRUE(plan.downgrades.empty());
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{kHost, Pages({2})}}));
  EXPECT_EQ(Descriptor(directory).read_masks[0], Pages({2}));
  EXPECT_EQ(Descriptor(directory).read_masks[1], Pages({2}));
}

TEST(CoherenceDirectoryTest, UpgradeWithNoOtherWriterCopiesNothing) {
  CoherenceDirectory directory(2);
  Read(directory, 0, 4);
  Read(directory, 1, 4);
  const FaultPlan plan = Write(directory, 1, 4);
  EXPECT_TRUE(plan.fetches.empty());
  EXPECT_TRUE(plan.downgrades.empty());
  EXPECT_EQ(plan.map_write, Pages({4}));
}

TEST(CoherenceDirectoryTest, UpgradeWithAWriterElsewhereFetchesFromIt) {
  CoherenceDirectory directory(2);
  Write(directory, 1, 4);
  Read(directory, 0, 4);
  // Device 1 may have written since device 0 copied the page.
  const FaultPlan plan = Write(directory, 0, 4);
  EXPECT_EQ(plan.fetches, (std::vector<Fetch>{{1, Pages({4})}}));
  EXPECT_EQ(plan.downgrades, (std::vector<Downgrade>{{1, kBlock, Pages({4})}}));
}

TEST(CoherenceDirectoryTest, DuplicateFaultsAreLeftOutOfThePlan) {
  CoherenceDirectory directory(2);
  Write(directory, 0, 6);
  const FaultPlan again = Service(directory, 0, FaultedPages{Pages({6}), Pages({6})});
  EXPECT_TRUE(again.fetches.empty());
  EXPECT_TRUE(again.map_read.none());
  EXPECT_TRUE(again.map_write.none());
}

TEST(CoherenceDirectoryTest, BatchIsGroupedBySource) {
  CoherenceDirectory directory(3);
  Write(directory, 1, 0);
  Write(directory, 2, 1);
  const FaultPlan plan = Service(directory, 0, FaultedPages{Pages({0, 1, 2}), Pages({1, 3})});
  EXPECT_EQ(plan.fetches,
            (std::vector<Fetch>{{1, Pages({0})}, {2, Pages({1})}, {kHost, Pages({2, 3})}}));
  EXPECT_EQ(plan.downgrades, (std::vector<Downgrade>{{2, kBlock, Pages({1})}}));
  EXPECT_EQ(plan.map_read, Pages({0, 2}));
  EXPECT_EQ(plan.map_write, Pages({1, 3}));
}

TEST(CoherenceDirectoryTest, KernelEndUnmapsReadersOfPagesAnotherDeviceMayWrite) {
  CoherenceDirectory directory(3);
  Write(directory, 0, 1);
  Read(directory, 1, 1);
  Read(directory, 2, 1);
  Read(directory, 2, 8);  // nobody writes page 8: its readers stay
  absl::StatusOr<std::vector<Unmap>> unmaps = directory.EndKernel();
  ASSERT_TRUE(unmaps.ok()) << unmaps.status();
  EXPECT_EQ(*unmaps, (std::vector<Unmap>{{1, kBlock, Pages({1})}, {2, kBlock, Pages({1})}}));
  const BlockDescriptor& descriptor = Descriptor(directory);
  EXPECT_TRUE(descriptor.read_masks[1].none());
  EXPECT_EQ(descriptor.read_masks[2], Pages({8}));
  EXPECT_EQ(descriptor.write_masks[0], Pages({1}));
  unmaps = directory.EndKernel();
  ASSERT_TRUE(unmaps.ok());
  EXPECT_TRUE(unmaps->empty());
}

// As printed: write protection, not a write seen in this kernel, decides.
TEST(CoherenceDirectoryTest, KernelEndUnmapsReadersOfAWriterFromAnEarlierKernel) {
  CoherenceDirectory directory(2);
  Write(directory, 0, 3);
  ASSERT_TRUE(directory.EndKernel().ok());
  Read(directory, 1, 3);
  absl::StatusOr<std::vector<Unmap>> unmaps = directory.EndKernel();
  ASSERT_TRUE(unmaps.ok());
  EXPECT_EQ(*unmaps, (std::vector<Unmap>{{1, kBlock, Pages({3})}}));
}

TEST(CoherenceDirectoryTest, OldWriterDowngradedInAKernelIsUnmappedAtItsEnd) {
  CoherenceDirectory directory(2);
  Write(directory, 0, 3);
  Write(directory, 1, 3);
  absl::StatusOr<std::vector<Unmap>> unmaps = directory.EndKernel();
  ASSERT_TRUE(unmaps.ok());
  EXPECT_EQ(*unmaps, (std::vector<Unmap>{{0, kBlock, Pages({3})}}));
}

TEST(CoherenceDirectoryTest, LockIsHandedToWaitingDevicesInArrivalOrder) {
  CoherenceDirectory directory(3);
  EXPECT_EQ(*directory.RequestLock(0, kBlock), LockReply::kGranted);
  EXPECT_EQ(*directory.RequestLock(2, kBlock), LockReply::kQueued);
  EXPECT_EQ(*directory.RequestLock(1, kBlock), LockReply::kQueued);
  EXPECT_EQ(*directory.RequestLock(1, kBlock + 1), LockReply::kGranted);  // another block
  // A waiting device may not hand over its faults yet (step 6 follows 5).
  EXPECT_FALSE(directory.ResolveFaults(2, kBlock, FaultedPages{Pages({0}), {}}).ok());
  EXPECT_FALSE(directory.RequestLock(0, kBlock).ok());
  EXPECT_FALSE(directory.RequestLock(2, kBlock).ok());
  EXPECT_FALSE(directory.Unlock(2, kBlock).ok());
  EXPECT_EQ(*directory.Unlock(0, kBlock), std::optional<int>(2));
  EXPECT_TRUE(directory.ResolveFaults(2, kBlock, FaultedPages{Pages({0}), {}}).ok());
  EXPECT_EQ(*directory.Unlock(2, kBlock), std::optional<int>(1));
  EXPECT_EQ(*directory.Unlock(1, kBlock), std::nullopt);
  EXPECT_FALSE(Descriptor(directory).lock_holder.has_value());
}

TEST(CoherenceDirectoryTest, KernelCannotEndWhileAFaultIsBeingServiced) {
  CoherenceDirectory directory(2);
  ASSERT_TRUE(directory.RequestLock(1, kBlock).ok());
  EXPECT_FALSE(directory.EndKernel().ok());
  EXPECT_FALSE(directory.SetReadOnly(kBlock, true).ok());
  ASSERT_TRUE(directory.Unlock(1, kBlock).ok());
  EXPECT_TRUE(directory.EndKernel().ok());
}

TEST(CoherenceDirectoryTest, ReadOnlyBlockKeepsItsCopiesAcrossKernels) {
  CoherenceDirectory directory(3);
  Write(directory, 0, 5);
  ASSERT_TRUE(directory.EndKernel().ok());
  absl::StatusOr<std::vector<Downgrade>> downgrades = directory.SetReadOnly(kBlock, true);
  ASSERT_TRUE(downgrades.ok());
  EXPECT_EQ(*downgrades, (std::vector<Downgrade>{{0, kBlock, Pages({5})}}));
  EXPECT_EQ(Read(directory, 1, 5).fetches, (std::vector<Fetch>{{0, Pages({5})}}));
  Read(directory, 2, 5);
  absl::StatusOr<std::vector<Unmap>> unmaps = directory.EndKernel();
  ASSERT_TRUE(unmaps.ok());
  EXPECT_TRUE(unmaps->empty());
  for (int device = 0; device < 3; ++device) {
    EXPECT_EQ(Descriptor(directory).read_masks[device], Pages({5})) << device;
  }
  // The launch found no write to the block: a write fault contradicts it.
  ASSERT_TRUE(directory.RequestLock(1, kBlock).ok());
  EXPECT_FALSE(directory.ResolveFaults(1, kBlock, FaultedPages{{}, Pages({5})}).ok());
  ASSERT_TRUE(directory.Unlock(1, kBlock).ok());
  // A later kernel that writes the block clears the flag at its launch.
  downgrades = directory.SetReadOnly(kBlock, false);
  ASSERT_TRUE(downgrades.ok());
  EXPECT_TRUE(downgrades->empty());
  const FaultPlan plan = Write(directory, 1, 5);
  EXPECT_TRUE(plan.fetches.empty());  // its read-only copy is the newest
  EXPECT_EQ(plan.map_write, Pages({5}));
}

TEST(CoherenceDirectoryTest, RejectsDevicesOutsideTheCluster) {
  CoherenceDirectory directory(2);
  EXPECT_FALSE(directory.RequestLock(2, kBlock).ok());
  EXPECT_FALSE(directory.RequestLock(-1, kBlock).ok());
  EXPECT_FALSE(directory.Unlock(5, kBlock).ok());
  EXPECT_FALSE(directory.ResolveFaults(3, kBlock, FaultedPages{}).ok());
}

}  // namespace
}  // namespace umlab::snurhac
