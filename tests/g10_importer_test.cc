// The G10 importer on a transformer graph, against the numbers G10's
// artifact documents (data/g10/FORMAT.md) on the BERT_Base fixture
// at batch 256. CNN graphs: g10_cnn_importer_test.cc.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "tests/g10_fixture.h"
#include "workloads/g10/g10_graph.h"
#include "workloads/g10/g10_transformer_graph.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

using g10_test::CopyFixture;
using g10_test::ReadAll;
using g10_test::Sizes;
using g10_test::SmallBatchDir;

const std::string& kFixture = g10_test::FixtureDir();

const G10Model& Bert() {
  static const G10Model* model = [] {
    absl::StatusOr<G10Model> loaded = LoadG10Model(kFixture, "BERT_Base", 256);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return new G10Model(loaded.ok() ? *std::move(loaded) : G10Model());
  }();
  return *model;
}

TEST(G10Importer, ReproducesFormatMdCounts) {
  const G10Model& model = Bert();
  EXPECT_EQ(model.tensors.size(), 1463u);
  EXPECT_EQ(model.workspace_tensors, 0);
  ASSERT_EQ(model.kernels.size(), 1369u);
  EXPECT_EQ(model.forward_kernels, 477);
  EXPECT_EQ(model.kernels[477].name, "makeLoss");
  EXPECT_EQ(model.kernels.size() - 478, 891u);  // backward kernels
  // FORMAT.md: globals total 17,823,494,144 B and intermediates
  // 141,134,852,096 B at B=256.
  EXPECT_EQ(model.global_bytes, 17'823'494'144u);
  EXPECT_EQ(model.intermediate_bytes, 141'134'852'096u);
}

TEST(G10Importer, CountsDoNotDependOnBatch) {
  const std::string text = ReadAll(kFixture + "/frontend/Nets/BERT_Base.txt");
  for (int batch : {1, 32}) {
    absl::StatusOr<G10Model> model = ParseG10TransformerGraph(text, "BERT_Base.txt", batch, 210);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(model->tensors.size(), 1463u) << batch;
    EXPECT_EQ(model->kernels.size(), 1369u) << batch;
  }
}

TEST(G10Importer, FirstKernelsMatchFormatMd) {
  const G10Model& model = Bert();
  ASSERT_GE(model.kernels.size(), 3u);
  const G10Kernel& k0 = model.kernels[0];
  EXPECT_EQ(k0.name, "GatherV2_Forward");
  EXPECT_EQ(k0.op_id, 215);
  EXPECT_THAT(Sizes(model, k0.inputs), UnorderedElementsAre(131'072u, 8'192u));
  EXPECT_THAT(Sizes(model, k0.outputs), UnorderedElementsAre(100'663'296u));
  EXPECT_EQ(k0.ideal_ns, 197'632);

  const G10Kernel& k1 = model.kernels[1];
  EXPECT_EQ(k1.name, "GatherV2_Forward");
  EXPECT_EQ(k1.op_id, 213);
  EXPECT_THAT(Sizes(model, k1.inputs), UnorderedElementsAre(131'072u, 93'765'632u));
  EXPECT_THAT(Sizes(model, k1.outputs), UnorderedElementsAre(100'663'296u));
  EXPECT_EQ(k1.ideal_ns, 206'848);

  const G10Kernel& k2 = model.kernels[2];
  EXPECT_EQ(k2.name, "Add_Forward");
  EXPECT_EQ(k2.op_id, 214);
  EXPECT_THAT(Sizes(model, k2.inputs), UnorderedElementsAre(100'663'296u, 100'663'296u));
  EXPECT_THAT(Sizes(model, k2.outputs), UnorderedElementsAre(100'663'296u));
  EXPECT_EQ(k2.ideal_ns, 428'032);
  // Input 1 of op 214 is global id 1 (a pre-broadcast parameter).
  int globals = 0;
  for (int t : k2.inputs) globals += model.tensors[t].global ? 1 : 0;
  EXPECT_EQ(globals, 1);
}

TEST(G10Importer, PerKernelTimesAreTheMeasuredOnes) {
  // Every kernel's time is line i of cudnn256.txt; their sum is G10's ideal
  // iteration time, 7285.47 ms in FORMAT.md.
  const double total_ms =
      g10_test::ExpectTimesAreTheFile(Bert(), kFixture + "/results/BERT_Base/cudnn256.txt");
  EXPECT_NEAR(total_ms, 7285.47, 0.01);
}

TEST(G10Importer, LayoutIsStaticAndPacked) { g10_test::ExpectPackedLayout(Bert()); }

TEST(G10Importer, RunsOnTheSim) { g10_test::ExpectRunsOnTheSim("BERT_Base", 256, 1369); }

TEST(G10Importer, ImportWritesATraceReplayAccepts) {
  g10_test::ExpectImportThenReplay("BERT_Base", 256, "1463 tensors, 1369 kernels");
}

TEST(G10Importer, UsageErrorsExitTwo) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::Main({"import-g10", "--model=BERT_Base", "--batch=256"}, out, err),
            cli::kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--output"));
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(G10Importer, CorruptTimeFileGivesOneLineError) {
  const std::string dir = CopyFixture("corrupt_times");
  const std::string path = dir + "/results/BERT_Base/cudnn256.txt";
  std::string text = ReadAll(path);
  const size_t at = text.find("0004 ");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 5, "0004 x");
  std::ofstream(path, std::ios::trunc) << text;
  std::ostringstream out, err;
  EXPECT_EQ(cli::Main({"import-g10", "--model=BERT_Base", "--batch=256", "--dir=" + dir,
                       "--output=" + dir + "/out.umt"},
                      out, err),
            cli::kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("cudnn256.txt:5:"));
  EXPECT_EQ(CountLines(err.str()), 1) << err.str();
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.umt"));
}

TEST(G10Importer, CorruptGraphGivesOneLineError) {
  const std::string dir = CopyFixture("corrupt_graph");
  const std::string path = dir + "/frontend/Nets/BERT_Base.txt";
  std::string text = ReadAll(path);
  // Line 9 is the rank of op 215's second input (`2`).
  std::vector<std::string> lines;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 9u);
  ASSERT_EQ(lines[8], "2");
  lines[8] = "two";
  std::ofstream file(path, std::ios::trunc);
  for (const std::string& line : lines) file << line << "\n";
  file.close();
  absl::StatusOr<G10Model> model = LoadG10Model(dir, "BERT_Base", 256);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("BERT_Base.txt:9:"));
  EXPECT_THAT(std::string(model.status().message()), Not(HasSubstr("\n")));
}

TEST(G10Importer, ListNamesEachModelWithItsCompleteBatches) {
  // The shipped samples, which are also --list's default directory.
  std::ostringstream out, err;
  EXPECT_EQ(cli::Main({"import-g10", "--list"}, out, err), cli::kExitOk) << err.str();
  EXPECT_EQ(out.str(), "BERT_Base: batch 256\nResNet152: batch 1280\n");
  // A batch missing one of its four files does not count.
  const std::string dir = CopyFixture("list_incomplete");
  std::filesystem::remove(dir + "/results/ResNet152/cudnn1280PF.txt");
  std::ostringstream partial, partial_err;
  EXPECT_EQ(cli::Main({"import-g10", "--list", "--dir=" + dir}, partial, partial_err),
            cli::kExitOk);
  EXPECT_EQ(partial.str(), "BERT_Base: batch 256\nResNet152: no complete batch\n");
  // No G10 data there: one line, exit 1.
  std::ostringstream none, none_err;
  EXPECT_EQ(cli::Main({"import-g10", "--list", "--dir=" + dir + "/results"}, none, none_err),
            cli::kExitFailure);
  EXPECT_EQ(CountLines(none_err.str()), 1) << none_err.str();
  EXPECT_THAT(none_err.str(), HasSubstr("is not a directory"));
}

TEST(G10Importer, MissingBatchNamesTheShippedOnes) {
  absl::StatusOr<G10Model> model = LoadG10Model(kFixture, "BERT_Base", 128);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("found: 256"));
}

}  // namespace
}  // namespace umlab
