// What the memferry and go-memferry tests share: the device their
// hand-built programs run on, and ways to read a program and a policy's
// plan and statistics.
#ifndef UMLAB_TESTS_MEMFERRY_SUPPORT_H_
#define UMLAB_TESTS_MEMFERRY_SUPPORT_H_

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "core/program_graph.h"
#include "policies/memferry/memferry.h"
#include "tests/program_builder.h"
#include "tests/sim_harness.h"

namespace umlab::testing {

// The test device with remote reads at a quarter of the copy rate: reading
// a whole weight through a mapping then costs more than copying it, as a
// GEMM's re-reads make it cost on a GPU, so the planner has a reason to
// copy some layers in.
inline DeviceConfig SlowRemoteDevice() {
  DeviceConfig device = TestDevice();
  device.link.remote_read_bytes_per_second = 0.25e9;
  return device;
}

// Names the kernel `exec_id` (kKernelDefine): the planner reads layers from
// kernel names.
inline void NameKernel(ProgramBuilder& p, uint32_t exec_id, const std::string& name) {
  Event event;
  event.kind = EventKind::kKernelDefine;
  event.exec_id = exec_id;
  event.name = name;
  p.Raw(event);
}

inline ProgramGraph Graph(const ProgramBuilder& program) {
  VectorSource source = program.Source();
  absl::StatusOr<ProgramGraph> graph = ReadProgramGraph(source);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *std::move(graph) : ProgramGraph();
}

// `spec` as --policy takes it: "memferry", "go-memferry:reserve=0.5".
inline std::unique_ptr<Policy> MakePolicy(const std::string& spec) {
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create(spec);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return policy.ok() ? *std::move(policy) : nullptr;
}

inline const MemferryPolicy& AsMemferry(const Policy& policy) {
  return dynamic_cast<const MemferryPolicy&>(policy);
}

inline std::map<std::string, PolicyStats::Value> StatsOf(const Policy& policy) {
  PolicyStats stats;
  policy.ReportStats(stats);
  std::map<std::string, PolicyStats::Value> by_name;
  for (const PolicyStats::Counter& counter : stats.counters()) {
    by_name[counter.name] = counter.value;
  }
  return by_name;
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_MEMFERRY_SUPPORT_H_
