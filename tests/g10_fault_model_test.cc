// G10's per-kernel fault time (emu/g10_fault_model.h), against figures
// worked by hand from the artifact's performance_model.
#include "emu/g10_fault_model.h"

#include "gtest/gtest.h"

namespace umlab {
namespace {

// G10's example.config: PCIe 15.754 GB/s, SSD 3.2 GB/s, 45 us system and
// 20 us SSD latency.
DeviceConfig G10Device() {
  DeviceConfig device;
  device.link.h2d_bytes_per_second = 15.754e9;
  device.link.storage = StorageConfig{true, 3.2e9, 3.0e9, 20000, 16000};
  device.fault_latency_ns = 45000;
  return device;
}

// 1 ms ideal, 3 ms with outputs faulted, 7 ms with everything faulted: the
// kernel takes faulted inputs and outputs in at 1,024,000 bytes/ms each.
G10KernelFaults Kernel() {
  G10KernelFaults kernel;
  kernel.ideal_ns = 1000000;
  kernel.input_pf_ns = 3000000;
  kernel.pf_ns = 7000000;
  kernel.input_pages = 1000;   // 4,096,000 bytes
  kernel.output_pages = 500;   // 2,048,000 bytes
  return kernel;
}

TEST(G10FaultModelTest, NothingMissingCostsNothing) {
  EXPECT_EQ(G10FaultTime(Kernel(), G10Device(), G10Times::kMeasured), 0);
}

TEST(G10FaultModelTest, EverythingMissingFromTheHostCostsTheMeasuredDifference) {
  G10KernelFaults kernel = Kernel();
  kernel.missing_input_pages = 1000;
  kernel.missing_output_pages = 500;
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 6000000);  // PF - ideal
}

TEST(G10FaultModelTest, ChargesTheMissingFraction) {
  G10KernelFaults kernel = Kernel();
  kernel.missing_input_pages = 500;
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 2000000);  // half of PF - InputPF
  kernel.missing_input_pages = 0;
  kernel.missing_output_pages = 250;
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 1000000);  // half of InputPF - ideal
}

TEST(G10FaultModelTest, StorageAndHostFaultsOverlap) {
  G10KernelFaults kernel = Kernel();
  kernel.missing_input_pages = 1000;
  kernel.storage_input_pages = 250;
  // Storage: 1,024,000 bytes at 1,024,000 x 45/65 bytes/ms = 1.444 ms; the
  // host's 3,072,000 bytes at 1,024,000 bytes/ms = 3 ms; the longer counts.
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 3000000);
  kernel.storage_input_pages = 1000;
  // All from storage: 4,096,000 / (1,024,000 x 45/65) = 5.777... ms.
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 5777777);
}

TEST(G10FaultModelTest, TheDriveCapsItsShare) {
  G10KernelFaults kernel = Kernel();
  kernel.missing_input_pages = 1000;
  kernel.storage_input_pages = 1000;
  DeviceConfig device = G10Device();
  device.link.storage.read_bytes_per_second = 0.5e9;  // 500,000 bytes/ms
  EXPECT_EQ(G10FaultTime(kernel, device, G10Times::kMeasured), 8192000);   // 4,096,000 / 500,000 ms
}

TEST(G10FaultModelTest, AKernelThatFaultsForFreeIsBoundByTheLink) {
  G10KernelFaults kernel = Kernel();
  kernel.pf_ns = kernel.input_pf_ns;  // inputs fault at no measured cost
  kernel.missing_input_pages = 1000;
  // G10's unbounded rate, capped at the link: 4,096,000 / 15,754,000 ms.
  EXPECT_EQ(G10FaultTime(kernel, G10Device(), G10Times::kMeasured), 259997);
}

// The artifact reads every time under a second as 0 ms, so these kernels
// fault at the link's (or the drive's) full bandwidth, as G10's published
// runs did: kernel 0 of BERT_Base at 256 faults its 100,663,296 output
// bytes in 6.389698 ms (G10's log, rounded), 100,663,296 / 15,754,000 bytes per ms.
TEST(G10FaultModelTest, TheArtifactsTimesUnderASecondReadAsZero) {
  G10KernelFaults kernel;
  kernel.ideal_ns = 197632;
  kernel.input_pf_ns = 15180800;
  kernel.pf_ns = 73269248;
  kernel.input_pages = 34;
  kernel.output_pages = 24576;
  kernel.missing_output_pages = 24576;
  EXPECT_EQ(G10FaultTime(kernel, G10Device()), 6389697);  // G10 logs it rounded
  // All from storage: at the drive's 3,200,000 bytes per ms.
  kernel.storage_output_pages = 24576;
  EXPECT_EQ(G10FaultTime(kernel, G10Device()), 31457280);
}

// A kernel whose PF time reaches a second keeps it, in whole seconds: BERT's
// 1,510 ms kernel reads as PF = 1,000 ms over InputPF = ideal = 0.
TEST(G10FaultModelTest, TheArtifactKeepsWholeSeconds) {
  G10KernelFaults kernel;
  kernel.ideal_ns = 145000000;
  kernel.input_pf_ns = 332000000;
  kernel.pf_ns = 1510000000;
  kernel.input_pages = 1000;
  kernel.missing_input_pages = 500;
  EXPECT_EQ(G10FaultTime(kernel, G10Device()), 500000000);  // half of 1,000 ms
}

}  // namespace
}  // namespace umlab
