// KernelAssembler: it hands back exactly the kernels and events a program
// holds, and rejects each kind of malformed program with its own message.
#include "core/kernel_assembler.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/program_builder.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

using ::testing::HasSubstr;
using ::umlab::testing::ProgramBuilder;
using ::umlab::testing::VectorSource;

struct Assembled {
  std::vector<Event> flattened;  // every step's events, in order
  int kernels = 0;
  int accesses = 0;
  absl::Status status;
};

Assembled Assemble(EventSource& program) {
  Assembled out;
  KernelAssembler assembler(program);
  while (assembler.Next()) {
    if (!assembler.is_kernel()) {
      EXPECT_NE(assembler.event().kind, EventKind::kAccess);
      out.flattened.push_back(assembler.event());
      continue;
    }
    ++out.kernels;
    const Event& begin = assembler.kernel_begin();
    EXPECT_EQ(begin.kind, EventKind::kKernelBegin);
    EXPECT_EQ(assembler.kernel_end().kind, EventKind::kKernelEnd);
    EXPECT_EQ(assembler.kernel_end().exec_id, begin.exec_id);
    EXPECT_EQ(assembler.kernel_events().size(), assembler.accesses().size() + 2);
    for (const Event& access : assembler.accesses()) {
      EXPECT_EQ(access.kind, EventKind::kAccess);
      ++out.accesses;
    }
    out.flattened.insert(out.flattened.end(), assembler.kernel_events().begin(),
                         assembler.kernel_events().end());
  }
  out.status = assembler.status();
  return out;
}

std::vector<Event> ProgramEvents(EventSource& source, int* kernels, int* accesses) {
  std::vector<Event> events;
  Event event;
  while (source.Next(event)) {
    if (!event.IsProgramEvent()) continue;
    if (event.kind == EventKind::kKernelBegin) ++*kernels;
    if (event.kind == EventKind::kAccess) ++*accesses;
    events.push_back(event);
  }
  EXPECT_TRUE(source.status().ok()) << source.status();
  return events;
}

// A generated program with gathers (dlrm) and one without (mlp): the steps,
// laid end to end, are the program itself, one kernel per begin.
TEST(KernelAssemblerTest, HandsBackTheProgramsKernels) {
  for (const char* spec : {"mlp:layers=2,hidden=64,batch=8,iterations=2",
                           "dlrm:batch=64,iterations=2"}) {
    absl::StatusOr<std::unique_ptr<Workload>> workload = Workloads().Create(spec, ComputeSpec{});
    ASSERT_TRUE(workload.ok()) << workload.status();
    int kernels = 0, accesses = 0;
    std::unique_ptr<EventSource> reference = (*workload)->Open();
    const std::vector<Event> expected = ProgramEvents(*reference, &kernels, &accesses);
    std::unique_ptr<EventSource> program = (*workload)->Open();
    const Assembled assembled = Assemble(*program);
    ASSERT_TRUE(assembled.status.ok()) << spec << ": " << assembled.status;
    EXPECT_GT(kernels, 10) << spec;
    EXPECT_EQ(assembled.kernels, kernels) << spec;
    EXPECT_EQ(assembled.accesses, accesses) << spec;
    EXPECT_TRUE(assembled.flattened == expected) << spec;
  }
}

// A recorded trace carries faults and transfers between the program events:
// the assembler skips them and keeps the program intact.
TEST(KernelAssemblerTest, SkipsObservedEventsOfARecordedTrace) {
  const std::string path =
      UMLAB_SOURCE_DIR "/tests/data/cuda/mlp_small_h200_demand.umt";
  absl::StatusOr<std::unique_ptr<TraceReader>> reference = TraceReader::Open(path);
  ASSERT_TRUE(reference.ok()) << reference.status();
  int kernels = 0, accesses = 0;
  const std::vector<Event> expected = ProgramEvents(**reference, &kernels, &accesses);
  absl::StatusOr<std::unique_ptr<TraceReader>> trace = TraceReader::Open(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  const Assembled assembled = Assemble(**trace);
  ASSERT_TRUE(assembled.status.ok()) << assembled.status;
  EXPECT_EQ(assembled.kernels, 48);
  EXPECT_EQ(assembled.accesses, 144);
  EXPECT_EQ(assembled.kernels, kernels);
  EXPECT_TRUE(assembled.flattened == expected);
}

TEST(KernelAssemblerTest, EmptyKernelHasNoAccesses) {
  ProgramBuilder program;
  program.Alloc(0, 1).Begin(3, 1000).End(3);
  VectorSource source = program.Source();
  KernelAssembler assembler(source);
  ASSERT_TRUE(assembler.Next());
  EXPECT_FALSE(assembler.is_kernel());
  EXPECT_EQ(assembler.event().kind, EventKind::kAlloc);
  ASSERT_TRUE(assembler.Next());
  ASSERT_TRUE(assembler.is_kernel());
  EXPECT_EQ(assembler.kernel_begin().exec_id, 3u);
  EXPECT_EQ(assembler.kernel_begin().duration_ns, 1000);
  EXPECT_TRUE(assembler.accesses().empty());
  EXPECT_FALSE(assembler.Next());
  EXPECT_TRUE(assembler.status().ok()) << assembler.status();
}

// Each malformed program fails with its own message, after handing back the
// well-formed steps before the fault, and stays failed.
struct Malformed {
  const char* name;
  ProgramBuilder program;
  int good_steps;
  const char* message;
};

std::vector<Malformed> MalformedPrograms() {
  const uint64_t a = ProgramBuilder::BlockAddress(0);
  std::vector<Malformed> cases;
  cases.push_back({"access outside a kernel",
                   ProgramBuilder().Alloc(0, 1).Kernel(1, 10, {0}).Access(a, 64, false), 2,
                   "malformed program: an access outside any kernel (at event access, exec id 0)"});
  cases.push_back({"nested begin", ProgramBuilder().Alloc(0, 1).Begin(1, 10).Begin(2, 10), 1,
                   "malformed program: a kernel begins inside another (at event kernel-begin, "
                   "exec id 2)"});
  cases.push_back({"end without begin", ProgramBuilder().Kernel(1, 10, {0}).End(1), 1,
                   "malformed program: a kernel end with no kernel running (at event kernel-end, "
                   "exec id 1)"});
  cases.push_back({"end of another kernel",
                   ProgramBuilder().Begin(1, 10).Access(a, 64, true).End(2), 0,
                   "malformed program: a kernel end inside kernel 1 (at event kernel-end, "
                   "exec id 2)"});
  cases.push_back({"ends inside a kernel", ProgramBuilder().Alloc(0, 1).Begin(4, 10).Access(a, 64, false),
                   1,
                   "malformed program: the program ends inside a kernel (at event kernel-begin, "
                   "exec id 4)"});
  cases.push_back({"allocator event inside a kernel",
                   ProgramBuilder().Alloc(0, 2).Begin(5, 10).Free(1, 1).End(5), 1,
                   "malformed program: a free event inside kernel 5 (at event free, exec id 0)"});
  return cases;
}

class MalformedProgramTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedProgramTest, FailsWithItsOwnMessage) {
  const Malformed& bad = GetParam();
  VectorSource source = bad.program.Source();
  KernelAssembler assembler(source);
  int steps = 0;
  while (assembler.Next()) ++steps;
  EXPECT_EQ(steps, bad.good_steps);
  EXPECT_EQ(assembler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(assembler.status().message()), HasSubstr(bad.message));
  EXPECT_THAT(std::string(assembler.status().message()), HasSubstr("regenerate or re-record it"));
  EXPECT_FALSE(assembler.Next());
  EXPECT_EQ(assembler.status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Errors, MalformedProgramTest, ::testing::ValuesIn(MalformedPrograms()),
                         [](const ::testing::TestParamInfo<Malformed>& param) {
                           std::string name = param.param.name;
                           for (char& c : name) {
                             if (c == ' ') c = '_';
                           }
                           return name;
                         });

// A source that fails (a corrupt trace) fails the assembly with its own
// error, even inside a kernel.
class FailingSource final : public EventSource {
 public:
  bool Next(Event& event) override {
    if (sent_) return false;
    sent_ = true;
    event = Event{};
    event.kind = EventKind::kKernelBegin;
    event.exec_id = 1;
    return true;
  }
  absl::Status status() const override { return absl::DataLossError("trace is truncated"); }

 private:
  bool sent_ = false;
};

TEST(KernelAssemblerTest, PassesOnTheSourcesError) {
  FailingSource source;
  KernelAssembler assembler(source);
  EXPECT_FALSE(assembler.Next());
  EXPECT_EQ(assembler.status(), absl::DataLossError("trace is truncated"));
}

}  // namespace
}  // namespace umlab
