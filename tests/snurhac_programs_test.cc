// The grid programs of SnuRHAC's benchmarks (workloads/snurhac): their
// sizes against the thesis's Table 7.10, which accesses MAPA can analyse,
// and the sharing the thesis describes for them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/compute_spec.h"
#include "core/grid_program.h"
#include "emu/snurhac/execution_mode.h"
#include "emu/snurhac/grid_split.h"
#include "workloads/grid_workload.h"

namespace umlab {
namespace {

std::unique_ptr<GridProgram> Make(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<GridProgram>> program =
      GridWorkloads().Create(spec, ComputeSpec{});
  EXPECT_TRUE(program.ok()) << program.status();
  EXPECT_TRUE((*program)->Validate().ok()) << (*program)->Validate();
  return *std::move(program);
}

TEST(SnurhacProgramsTest, FootprintsAreTheThesisDeviceMemorySizes) {
  // Table 7.10, in MB (read as MiB).
  const std::map<std::string, double> thesis = {{"gemm", 3072},     {"gesummv", 8192},
                                                {"hotspot", 12288}, {"tpacf", 609},
                                                {"lavamd", 7492},   {"correlation", 128}};
  for (const auto& [name, mib] : thesis) {
    // What the program allocates (its arrays, not rounded up to blocks).
    double allocated = 0;
    // Held here: a range-for over a member of the returned temporary would
    // outlive it (ASan found the use after free).
    const std::unique_ptr<GridProgram> program = Make(name);
    for (const GridArray& array : program->arrays) allocated += static_cast<double>(array.bytes);
    EXPECT_NEAR(allocated / (1 << 20), mib, mib * 0.01) << name;
  }
}

// Which programs MAPA cannot fully analyse: the thesis names tpacf and
// lavaMD (§7.3.2); every other index is affine.
TEST(SnurhacProgramsTest, OnlyTpacfAndLavaMdHaveAccessesMapaCannotAnalyse) {
  for (const GridWorkloadRegistry::Entry* entry : GridWorkloads().Entries()) {
    const std::unique_ptr<GridProgram> program = Make(entry->name + ":scale=0.01");
    bool opaque = false;
    for (const GridKernel& kernel : program->launches) {
      for (const GridAccess& access : kernel.accesses) opaque |= !access.affine.has_value();
    }
    EXPECT_EQ(opaque, entry->name == "tpacf" || entry->name == "lavamd") << entry->name;
  }
}

// The write-overlap ratio of a kernel split over `devices`, from MAPA's view.
double Overlap(const GridProgram& program, const GridKernel& kernel, int devices) {
  absl::StatusOr<snurhac::GridSplit> split = snurhac::SplitGrid(kernel.grid, devices);
  EXPECT_TRUE(split.ok());
  std::vector<std::vector<ByteRange>> writes(devices);
  for (int device = 0; device < devices; ++device) {
    for (const GridAccess& access : kernel.accesses) {
      if (access.access == AccessType::kRead) continue;
      std::optional<std::vector<ByteRange>> ranges =
          EstimatedBytes(program, kernel, access, split->shares[device]);
      if (ranges.has_value())
        writes[device].insert(writes[device].end(), ranges->begin(), ranges->end());
    }
  }
  return snurhac::WriteOverlapRatio(writes);
}

// §7.3.2: correlation runs on one GPU because of its overlapping write
// ranges; the others split. (Its corr_kernel mirrors every row into a
// column, so every device's range spans the whole result.)
TEST(SnurhacProgramsTest, CorrelationsMirroredStoresOverlapAndOthersDoNot) {
  const std::unique_ptr<GridProgram> correlation = Make("correlation:scale=0.1");
  for (const GridKernel& kernel : correlation->launches) {
    const double ratio = Overlap(*correlation, kernel, 4);
    if (kernel.name == "corr_kernel") {
      EXPECT_GT(ratio, snurhac::kWriteOverlapThreshold);
    } else {
      EXPECT_LE(ratio, snurhac::kWriteOverlapThreshold) << kernel.name;
    }
  }
  for (const std::string name : {"gemm", "gesummv", "hotspot", "tpacf", "lavamd"}) {
    const std::unique_ptr<GridProgram> program = Make(name + ":scale=0.01");
    for (const GridKernel& kernel : program->launches) {
      EXPECT_LE(Overlap(*program, kernel, 4), snurhac::kWriteOverlapThreshold) << name;
    }
  }
}

// §7.3.2: "Each GPU in the cluster needs the full matrix B".
TEST(SnurhacProgramsTest, EveryGemmShareReadsAllOfB) {
  const std::unique_ptr<GridProgram> gemm = Make("gemm:scale=0.01");
  const GridKernel& kernel = gemm->launches[0];
  absl::StatusOr<snurhac::GridSplit> split = snurhac::SplitGrid(kernel.grid, 8);
  ASSERT_TRUE(split.ok());
  const GridArray& b = gemm->arrays[1];
  for (const GridShare& share : split->shares) {
    EXPECT_EQ(TouchedBytes(*gemm, kernel, kernel.accesses[2], share),
              (std::vector<ByteRange>{b.range()}));
  }
}

}  // namespace
}  // namespace umlab
