// The program read ahead for planning policies (core/program_graph.h):
// kernels, tensors and which is global, from hand-built programs.
#include "core/program_graph.h"

#include <gtest/gtest.h>

#include "tests/program_builder.h"

namespace umlab::testing {
namespace {

constexpr uint64_t kBlock = kBlockSize;
uint64_t At(int block) { return ProgramBuilder::BlockAddress(block); }

ProgramGraph Read(const ProgramBuilder& program) {
  VectorSource source = program.Source();
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(source);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *graph : ProgramGraph();
}

// Two iterations of: a weight W (block 0) set up before them, an
// intermediate A (block 1) activated and deactivated in each, and a
// teardown that deactivates W after the last kernel.
ProgramBuilder TwoIterations() {
  ProgramBuilder p;
  p.Alloc(0, 2).Activate(At(0), kBlock);
  for (int i = 0; i < 2; ++i) {
    p.Iteration(i).Activate(At(1), kBlock);
    p.Begin(1, 100).Access(At(0), kBlock, false).Access(At(1), kBlock, true).End(1);
    p.Begin(2, 200).Access(At(1), 4096, false).Access(At(1) + 8192, 4096, false).End(2);
    p.Deactivate(At(1), kBlock);
  }
  p.Deactivate(At(0), kBlock).Free(0, 2);
  return p;
}

TEST(ProgramGraphTest, KernelsTensorsAndTheirUses) {
  const ProgramGraph graph = Read(TwoIterations());
  ASSERT_EQ(graph.iterations.size(), 2u);
  const IterationGraph& first = graph.iterations[0];
  EXPECT_EQ(first.index, 0u);
  ASSERT_EQ(first.tensors.size(), 2u);
  EXPECT_EQ(first.tensors[0], (GraphTensor{At(0), kBlock, true, std::nullopt}));
  EXPECT_EQ(first.tensors[1], (GraphTensor{At(1), kBlock, false, std::nullopt}));
  ASSERT_EQ(first.kernels.size(), 2u);
  EXPECT_EQ(first.kernels[0].exec_id, 1u);
  EXPECT_EQ(first.kernels[0].duration_ns, 100);
  EXPECT_EQ(first.kernels[0].reads, std::vector<uint32_t>({0}));
  EXPECT_EQ(first.kernels[0].writes, std::vector<uint32_t>({1}));
  // Two reads of one tensor count once.
  EXPECT_EQ(first.kernels[1].reads, std::vector<uint32_t>({1}));
  EXPECT_TRUE(first.kernels[1].writes.empty());
  EXPECT_EQ(first.untracked_access_bytes, 0u);
}

TEST(ProgramGraphTest, AKernelSaysHowMuchOfEachTensorItTouches) {
  // Kernel 2 reads two pages of A; kernel 3 reads 100 bytes of W twice (one
  // page visited twice) and writes 3 bytes of A across a page boundary (two
  // pages), and 8 bytes past A's end, outside any tensor (one more page).
  ProgramBuilder p;
  p.Alloc(0, 2).Activate(At(0), kBlock).Iteration(0).Activate(At(1), 3 * 4096);
  p.Begin(2, 200).Access(At(1), 4096, false).Access(At(1) + 8192, 4096, false).End(2);
  p.Begin(3, 10)
      .Access(At(0) + 10, 100, false)
      .Access(At(0) + 10, 100, false)
      .Access(At(1) + 4095, 3, true)
      .Access(At(1) + 3 * 4096, 8, true)
      .End(3);
  const ProgramGraph graph = Read(p);
  ASSERT_EQ(graph.iterations.size(), 1u);
  const std::vector<GraphKernel>& kernels = graph.iterations[0].kernels;
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].read_touches, std::vector<TensorTouch>({{8192, 2}}));
  EXPECT_EQ(kernels[0].page_visits, 2u);
  EXPECT_EQ(kernels[1].reads, std::vector<uint32_t>({0}));
  EXPECT_EQ(kernels[1].read_touches, std::vector<TensorTouch>({{200, 2}}));
  EXPECT_EQ(kernels[1].writes, std::vector<uint32_t>({1}));
  EXPECT_EQ(kernels[1].write_touches, std::vector<TensorTouch>({{3, 2}}));
  EXPECT_EQ(kernels[1].page_visits, 5u);
}

TEST(ProgramGraphTest, IterationsThatTouchOtherBytesOfTheSameTensorsShareAShape) {
  // An embedding's gather: each iteration reads other rows of the table.
  ProgramBuilder p;
  p.Alloc(0, 1).Activate(At(0), kBlock);
  p.Iteration(0).Begin(1, 10).Access(At(0), 64, false).End(1);
  p.Iteration(1).Begin(1, 10).Access(At(0) + 8192, 64, false).Access(At(0), 64, false).End(1);
  const ProgramGraph graph = Read(p);
  ASSERT_EQ(graph.iterations.size(), 2u);
  EXPECT_NE(graph.iterations[0].kernels, graph.iterations[1].kernels);
  EXPECT_TRUE(graph.iterations[0].SameShape(graph.iterations[1]));
}

TEST(ProgramGraphTest, TheTeardownDoesNotMakeTheLastIterationsWeightsIntermediates) {
  // W is deactivated after the last kernel of the last iteration: the
  // program's end, not a death within the iteration, so both iterations
  // look alike and one plan serves them.
  const ProgramGraph graph = Read(TwoIterations());
  ASSERT_EQ(graph.iterations.size(), 2u);
  EXPECT_TRUE(graph.iterations[1].tensors[0].global);
  EXPECT_FALSE(graph.iterations[1].tensors[1].global);
  EXPECT_TRUE(graph.iterations[1].SameShape(graph.iterations[0]));
}

TEST(ProgramGraphTest, ATensorEndingBeforeTheLastKernelIsAnIntermediate) {
  // Activated before the iteration, read once, deactivated mid-iteration
  // (a caching allocator's block from the iteration before).
  ProgramBuilder p;
  p.Alloc(0, 2).Activate(At(0), kBlock).Iteration(0);
  p.Kernel(1, 10, {0});
  p.Deactivate(At(0), kBlock);
  p.Kernel(2, 10, {1}, true);
  const ProgramGraph graph = Read(p);
  ASSERT_EQ(graph.iterations.size(), 1u);
  ASSERT_EQ(graph.iterations[0].tensors.size(), 1u);
  EXPECT_FALSE(graph.iterations[0].tensors[0].global);
  // Block 1 was never activated: the second kernel's bytes are untracked.
  EXPECT_EQ(graph.iterations[0].untracked_access_bytes, kBlock);
}

TEST(ProgramGraphTest, WithoutActivationsTheSegmentsAreTheTensors) {
  ProgramBuilder p;
  p.Alloc(0, 1).Alloc(1, 1);
  p.Kernel(1, 10, {0, 1}, true);  // no iteration marker: iteration 0
  p.Free(1, 1);
  p.Kernel(2, 10, {0});
  const ProgramGraph graph = Read(p);
  ASSERT_EQ(graph.iterations.size(), 1u);
  const IterationGraph& only = graph.iterations[0];
  ASSERT_EQ(only.tensors.size(), 2u);
  EXPECT_TRUE(only.tensors[0].global);
  EXPECT_FALSE(only.tensors[1].global);  // freed mid-run
  EXPECT_EQ(only.kernels[0].writes, std::vector<uint32_t>({0, 1}));
  EXPECT_EQ(only.kernels[1].reads, std::vector<uint32_t>({0}));
}

TEST(ProgramGraphTest, AnAtomicAccessReadsAndWrites) {
  ProgramBuilder p;
  p.Alloc(0, 1).Activate(At(0), kBlock).Iteration(0).Begin(1, 10);
  Event atomic;
  atomic.kind = EventKind::kAccess;
  atomic.address = At(0);
  atomic.size = 64;
  atomic.access = AccessType::kAtomic;
  std::vector<Event> events = p.events();
  events.push_back(atomic);
  p.End(1);
  events.push_back(p.events().back());
  VectorSource source(events);
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(source);
  ASSERT_TRUE(graph.ok());
  EXPECT_EQ(graph->iterations[0].kernels[0].reads, std::vector<uint32_t>({0}));
  EXPECT_EQ(graph->iterations[0].kernels[0].writes, std::vector<uint32_t>({0}));
}

}  // namespace
}  // namespace umlab::testing
