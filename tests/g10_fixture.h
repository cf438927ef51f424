// Helpers the G10 importer tests share: the fixture copied from G10's
// artifact (data/g10, see NOTICE there), private copies of it, and
// readable views of a G10Model's tensors.
#ifndef UMLAB_TESTS_G10_FIXTURE_H_
#define UMLAB_TESTS_G10_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "workloads/g10/g10_graph.h"
#include "tests/temp_path.h"

namespace umlab::g10_test {

inline const std::string& FixtureDir() {
  static const std::string* dir =
      new std::string(UMLAB_SOURCE_DIR "/data/g10");
  return *dir;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A private copy of the fixture for tests that corrupt it. The running
// test's suite and name are part of the path: ctest runs test cases in
// parallel, and the transformer and CNN suites share test names.
inline std::string CopyFixture(const std::string& name) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = umlab::testing::PrivateTempPath(
      absl::StrCat("g10_", test->test_suite_name(), "_", test->name(), "_", name));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(FixtureDir(), dir, std::filesystem::copy_options::recursive);
  return dir;
}

// A fixture copy where `model` also "ships" batch `small`, with batch
// `shipped`'s kernel times borrowed and its workspaces scaled by
// small/shipped (non-zero ones stay non-zero), so the sim and trace tests run
// on a footprint of a few GB and stay fast, under sanitizers too. Structure
// is batch-independent; the times are not meaningful at this batch and no
// test checks numbers from these runs.
inline std::string SmallBatchDir(const std::string& model, int shipped, int small) {
  const std::string dir = CopyFixture("small_batch");
  const std::string results = absl::StrCat(dir, "/results/", model, "/cudnn");
  for (const char* suffix : {".txt", "InputPF.txt", "PF.txt"}) {
    std::filesystem::copy_file(absl::StrCat(results, shipped, suffix),
                               absl::StrCat(results, small, suffix));
  }
  std::ofstream workspace(absl::StrCat(results, small, "Workspace.txt"));
  std::ifstream in(absl::StrCat(results, shipped, "Workspace.txt"));
  for (std::string line; std::getline(in, line);) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t bytes = 0;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &bytes)) continue;
    if (bytes > 0) bytes = std::max<uint64_t>(1, bytes * small / shipped);
    workspace << fields[0] << " " << bytes << " B\n";
  }
  return dir;
}

inline std::vector<uint64_t> Sizes(const G10Model& model, const std::vector<int>& tensors) {
  std::vector<uint64_t> sizes;
  for (int t : tensors) sizes.push_back(model.tensors[t].bytes);
  return sizes;
}

// The tensors' descriptions, e.g. "layer1.0.conv1 weight".
inline std::vector<std::string> Whats(const G10Model& model, const std::vector<int>& tensors) {
  std::vector<std::string> whats;
  for (int t : tensors) whats.push_back(model.tensors[t].what);
  return whats;
}

// Every kernel's time is line i of `path` (a cudnn<B>.txt file); returns
// their sum in ms, G10's ideal iteration time.
inline double ExpectTimesAreTheFile(const G10Model& model, const std::string& path) {
  std::ifstream in(path);
  std::string index, unit;
  double ms = 0;
  size_t k = 0;
  Nanos total = 0;
  while (in >> index >> ms >> unit) {
    if (k >= model.kernels.size()) break;
    EXPECT_EQ(model.kernels[k].ideal_ns, static_cast<Nanos>(std::llround(ms * 1e6))) << k;
    EXPECT_GE(model.kernels[k].input_pf_ns, model.kernels[k].ideal_ns);
    EXPECT_GE(model.kernels[k].pf_ns, model.kernels[k].input_pf_ns);
    total += model.kernels[k].ideal_ns;
    ++k;
  }
  EXPECT_EQ(k, model.kernels.size());
  return static_cast<double>(total) / 1e6;
}

// The static layout: globals packed from 0, intermediates after them, each
// in creation order and page-rounded.
inline void ExpectPackedLayout(const G10Model& model) {
  uint64_t next_global = 0, next_intermediate = model.global_bytes;
  for (const G10Tensor& tensor : model.tensors) {
    EXPECT_EQ(tensor.bytes % 4096, 0u);
    EXPECT_GE(tensor.bytes, tensor.raw_bytes);
    uint64_t& next = tensor.global ? next_global : next_intermediate;
    EXPECT_EQ(tensor.offset, next) << tensor.what;
    next += tensor.bytes;
  }
  EXPECT_EQ(next_global, model.global_bytes);
  EXPECT_EQ(next_intermediate, model.global_bytes + model.intermediate_bytes);
}

// `umlab compare` of the g10 workload at batch 8 (the shipped times, copied
// under that batch) with demand and ideal: the importer runs end to end.
inline void ExpectRunsOnTheSim(const std::string& model, int shipped_batch, int kernels) {
  std::ostringstream out, err;
  const int rc = cli::Main({"compare", "--workload=g10", "--workload-arg",
                            "model=" + model + ",batch=8,iterations=1,dir=" +
                                SmallBatchDir(model, shipped_batch, 8),
                            "--policies=demand,ideal", "--format=json"},
                           out, err);
  ASSERT_EQ(rc, cli::kExitOk) << err.str();
  EXPECT_THAT(out.str(), ::testing::HasSubstr("\"policy\":\"demand\""));
  EXPECT_THAT(out.str(), ::testing::HasSubstr("\"policy\":\"ideal\""));
  EXPECT_THAT(out.str(), ::testing::HasSubstr(absl::StrCat("\"kernels\":", kernels)));
}

// `umlab import-g10` at batch 8 writes a trace that `umlab replay` accepts;
// the import's summary line contains `summary`.
inline void ExpectImportThenReplay(const std::string& model, int shipped_batch,
                                   const std::string& summary) {
  const std::string trace = umlab::testing::PrivateTempPath("g10_" + model + ".umt");
  std::ostringstream out, err;
  ASSERT_EQ(cli::Main({"import-g10", "--model=" + model, "--batch=8",
                       "--dir=" + SmallBatchDir(model, shipped_batch, 8), "--iterations=1",
                       "--output=" + trace},
                      out, err),
            cli::kExitOk)
      << err.str();
  EXPECT_THAT(out.str(), ::testing::HasSubstr(summary));
  std::ostringstream replay_out, replay_err;
  EXPECT_EQ(cli::Main({"replay", trace, "--policy=ideal", "--format=json"}, replay_out,
                      replay_err),
            cli::kExitOk)
      << replay_err.str();
  std::filesystem::remove(trace);
}

}  // namespace umlab::g10_test

#endif  // UMLAB_TESTS_G10_FIXTURE_H_
