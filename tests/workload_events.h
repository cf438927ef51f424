// Workloads by spec and their whole event stream, for the workload tests.
#ifndef UMLAB_TESTS_WORKLOAD_EVENTS_H_
#define UMLAB_TESTS_WORKLOAD_EVENTS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/event.h"
#include "core/event_source.h"
#include "gtest/gtest.h"
#include "workloads/workload.h"

namespace umlab::testing {

// The workload a spec names, or null after a test failure saying why.
inline std::unique_ptr<Workload> MakeWorkload(const std::string& spec,
                                              const ComputeSpec& compute = ComputeSpec{}) {
  absl::StatusOr<std::unique_ptr<Workload>> workload = Workloads().Create(spec, compute);
  EXPECT_TRUE(workload.ok()) << spec << ": " << workload.status();
  return workload.ok() ? std::move(*workload) : nullptr;
}

// Every event of one pass over the workload's program.
inline std::vector<Event> Drain(const Workload& workload) {
  std::unique_ptr<EventSource> source = workload.Open();
  std::vector<Event> events;
  Event event;
  while (source->Next(event)) events.push_back(event);
  EXPECT_TRUE(source->status().ok()) << source->status();
  return events;
}

// Every event of the workload a spec names; empty after a failure.
inline std::vector<Event> Drain(const std::string& spec) {
  std::unique_ptr<Workload> workload = MakeWorkload(spec);
  return workload ? Drain(*workload) : std::vector<Event>{};
}

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_WORKLOAD_EVENTS_H_
