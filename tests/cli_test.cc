// The `umlab` command end to end, in process: exit codes, one-line errors,
// determinism, record/replay and damaged traces.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "tests/temp_path.h"
#include "tests/umlab_in_process.h"

namespace umlab::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using umlab::testing::IsOneLine;
using umlab::testing::Outcome;
using umlab::testing::Umlab;

std::vector<std::string> With(std::vector<std::string> args) {
  return umlab::testing::WithSmallMlp(std::move(args));
}

std::string TempPath(const std::string& name) {
  return umlab::testing::PrivateTempPath(name);
}

TEST(CliTest, HelpListsEveryCommandAndExitsZero) {
  const Outcome help = Umlab({"--help"});
  EXPECT_EQ(help.code, kExitOk);
  for (const char* command : {"run", "record", "replay", "compare", "inspect", "policies",
                              "workloads", "devices", "backends"}) {
    EXPECT_THAT(help.out, HasSubstr(command));
  }
  EXPECT_EQ(Umlab({}).code, kExitUsage);  // no command: help on stderr, usage error
}

TEST(CliTest, CommandHelpShowsItsOptionsWithDefaults) {
  const Outcome help = Umlab({"compare", "--help"});
  EXPECT_EQ(help.code, kExitOk);
  for (const char* option : {"--workload", "--capacity", "--device", "--policies", "--format",
                             "--replay", "--backend", "--trace"}) {
    EXPECT_THAT(help.out, HasSubstr(option));
  }
  EXPECT_THAT(help.out, HasSubstr("[default: 0.5]"));
}

TEST(CliTest, UsageErrorsAreOneLineWithExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"frobnicate"},
      {"run", "--no-such-flag"},
      {"run", "--policy=nope"},
      {"run", "--workload=nope"},
      {"run", "--capacity=0"},
      {"run", "--capacity=lots"},
      {"run", "--capacity=1KiB"},
      {"run", "--device=tpu"},
      {"run", "--device-param", "h2d_gbps=-1"},
      {"run", "--format=xml"},
      {"run", "--replay=sometimes"},
      {"run", "--backend=quantum"},
      {"run", "--policy=demand:rows=4"},
      {"run", "--workload-arg", "layers=many"},
      {"record"},
      {"replay"},
      {"run", "stray-argument"},
  };
  for (const auto& args : bad) {
    const Outcome outcome = Umlab(args);
    EXPECT_EQ(outcome.code, kExitUsage) << args[0] << " " << (args.size() > 1 ? args[1] : "");
    EXPECT_TRUE(IsOneLine(outcome.err)) << outcome.err;
    EXPECT_TRUE(outcome.out.empty());
  }
}

TEST(CliTest, CompareJsonIsDeterministicAndCarriesTheContract) {
  const Outcome first = Umlab(With({"compare", "--capacity=0.5", "--format=json",
                                    "--policies=demand,ideal"}));
  ASSERT_EQ(first.code, kExitOk) << first.err;
  const Outcome second = Umlab(With({"compare", "--capacity=0.5", "--format=json",
                                     "--policies=demand,ideal"}));
  EXPECT_EQ(first.out, second.out);
  for (const char* key :
       {"\"policy\"", "\"backend\"", "\"workload\"", "\"device\"", "\"capacity_bytes\"",
        "\"footprint_bytes\"", "\"iterations\"", "\"faults\"", "\"faulted_pages\"",
        "\"faulted_in_flight_pages\"",
        "\"fault_batches\"", "\"h2d_bytes\"", "\"d2h_bytes\"", "\"prefetch_bytes\"",
        "\"prefetch_useful_bytes\"", "\"evicted_bytes\"", "\"invalidated_bytes\"",
        "\"time_ns\"", "\"stall_ns\"", "\"ideal_time_ns\"", "\"per_iteration\""}) {
    EXPECT_THAT(first.out, HasSubstr(key));
  }
  EXPECT_EQ(first.out.rfind("{\"contract_version\":\"1.4\",\"runs\":[", 0), 0u);
}

TEST(CliTest, WorkloadArgsJoinTheParametersANameCarries) {
  // --workload=NAME:K=V with --workload-arg K2=V2 is NAME:K=V,K2=V2.
  const Outcome joined = Umlab({"run", "--workload=mlp:layers=1", "--workload-arg",
                                "hidden=64,batch=8", "--capacity=1.0", "--format=json"});
  ASSERT_EQ(joined.code, kExitOk) << joined.err;
  const Outcome spelled = Umlab({"run", "--workload=mlp:layers=1,hidden=64,batch=8",
                                 "--capacity=1.0", "--format=json"});
  ASSERT_EQ(spelled.code, kExitOk) << spelled.err;
  EXPECT_THAT(joined.out, HasSubstr("\"footprint_bytes\""));
  const auto footprint = [](const std::string& out) {
    const size_t at = out.find("\"footprint_bytes\":");
    return out.substr(at, out.find(',', at) - at);
  };
  EXPECT_EQ(footprint(joined.out), footprint(spelled.out));
}

TEST(CliTest, ADefaultComparisonLeavesOutAPolicyThatRefusesTheCapacity) {
  // FlashNeuron keeps every weight on the device: at half of the small
  // mlp it cannot train, and says so in one line. Unnamed, it is left out
  // of the default comparison with that line on stderr; named, it fails
  // the command, whose other rows are still reported.
  const Outcome defaulted = Umlab(With({"compare", "--capacity=0.5", "--format=csv"}));
  ASSERT_EQ(defaulted.code, kExitOk) << defaulted.err;
  EXPECT_THAT(defaulted.err, HasSubstr("left out flashneuron: "));
  EXPECT_THAT(defaulted.out, HasSubstr("g10"));
  EXPECT_THAT(defaulted.out, Not(HasSubstr("flashneuron")));
  const Outcome named =
      Umlab(With({"compare", "--capacity=0.5", "--policies=demand,flashneuron"}));
  EXPECT_EQ(named.code, kExitFailure);
  EXPECT_TRUE(IsOneLine(named.err)) << named.err;
  EXPECT_THAT(named.err, HasSubstr("FlashNeuron cannot train this model here"));
  EXPECT_THAT(named.out, HasSubstr("demand"));
  EXPECT_THAT(named.out, Not(HasSubstr("flashneuron")));
}

TEST(CliTest, ParallelRunsGiveTheSameResultsInTheSameOrder) {
  const std::string policies = "--policies=demand,uvm-default,deepum,ideal";
  const Outcome one_at_a_time =
      Umlab(With({"compare", "--capacity=0.5", "--format=json", policies, "--jobs=1"}));
  ASSERT_EQ(one_at_a_time.code, kExitOk) << one_at_a_time.err;
  const Outcome parallel =
      Umlab(With({"compare", "--capacity=0.5", "--format=json", policies, "--jobs=3"}));
  ASSERT_EQ(parallel.code, kExitOk) << parallel.err;
  EXPECT_EQ(parallel.out, one_at_a_time.out);
  EXPECT_LT(parallel.out.find("\"policy\":\"demand\""),
            parallel.out.find("\"policy\":\"ideal\""));
  const Outcome bad = Umlab(With({"compare", "--jobs=-1"}));
  EXPECT_EQ(bad.code, kExitUsage);
  EXPECT_TRUE(IsOneLine(bad.err)) << bad.err;
}

TEST(CliTest, TableAndCsvFormats) {
  const Outcome table = Umlab(With({"compare", "--policies=demand,ideal"}));
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("speedup"));
  EXPECT_THAT(table.out, HasSubstr("ideal"));
  const Outcome csv = Umlab(With({"run", "--format=csv"}));
  ASSERT_EQ(csv.code, kExitOk) << csv.err;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 2);
}

TEST(CliTest, RecordThenReplayReproducesTheRun) {
  const std::string trace = TempPath("mlp.umt");
  const Outcome recorded =
      Umlab(With({"record", "--output=" + trace, "--capacity=0.5", "--format=json"}));
  ASSERT_EQ(recorded.code, kExitOk) << recorded.err;
  const Outcome run = Umlab(With({"run", "--capacity=0.5", "--format=json"}));
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_EQ(recorded.out, run.out);
  const Outcome replayed = Umlab({"replay", trace, "--capacity=0.5", "--format=json"});
  ASSERT_EQ(replayed.code, kExitOk) << replayed.err;
  EXPECT_EQ(replayed.out, run.out);  // identical metrics, identity keys included

  const Outcome inspected = Umlab({"inspect", trace});
  ASSERT_EQ(inspected.code, kExitOk) << inspected.err;
  EXPECT_THAT(inspected.out, HasSubstr("fault"));
  EXPECT_THAT(inspected.out, HasSubstr("3 iterations"));
  std::remove(trace.c_str());
}

TEST(CliTest, DamagedTracesFailWithOneLineAndExitOne) {
  const std::string trace = TempPath("damaged.umt");
  ASSERT_EQ(Umlab(With({"record", "--output=" + trace})).code, kExitOk);
  std::string bytes;
  {
    std::ifstream in(trace, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 200u);
  const std::string truncated = TempPath("truncated.umt");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string flipped_bytes = bytes;
  flipped_bytes[bytes.size() / 2] ^= 0x5a;
  const std::string flipped = TempPath("flipped.umt");
  std::ofstream(flipped, std::ios::binary) << flipped_bytes;
  const std::string not_a_trace = TempPath("notes.umt");
  std::ofstream(not_a_trace) << "hello\n";

  for (const std::string& path : {truncated, flipped, not_a_trace, TempPath("missing.umt")}) {
    for (const char* command : {"replay", "inspect"}) {
      const Outcome outcome = Umlab({command, path});
      EXPECT_EQ(outcome.code, kExitFailure) << command << " " << path;
      EXPECT_TRUE(IsOneLine(outcome.err)) << outcome.err;
    }
  }
  for (const std::string& path : {trace, truncated, flipped, not_a_trace}) std::remove(path.c_str());
}

TEST(CliTest, CapacityAcceptsBytesAndFractions) {
  const Outcome bytes = Umlab(With({"run", "--capacity=8MiB", "--format=json"}));
  ASSERT_EQ(bytes.code, kExitOk) << bytes.err;
  EXPECT_THAT(bytes.out, HasSubstr("\"capacity_bytes\":8388608"));
  const Outcome fraction = Umlab(With({"run", "--capacity=1.0", "--format=json"}));
  ASSERT_EQ(fraction.code, kExitOk) << fraction.err;
  EXPECT_THAT(fraction.out, HasSubstr("\"evicted_bytes\":0"));
}

TEST(CliTest, DeviceOverridesChangeTheResult) {
  const Outcome slow = Umlab(With({"run", "--format=csv", "--device-param", "h2d_gbps=2"}));
  const Outcome fast = Umlab(With({"run", "--format=csv"}));
  ASSERT_EQ(slow.code, kExitOk) << slow.err;
  EXPECT_NE(slow.out, fast.out);
}

TEST(CliTest, TheModelOfTheUnmodifiedDriverRefusesADeviceWithStorage) {
  for (const char* backend : {"--backend=sim:policy_from=user"}) {
    const Outcome refused = Umlab({"run", "--device=g10-a100", backend});
    EXPECT_NE(refused.code, kExitOk) << backend;
    EXPECT_TRUE(IsOneLine(refused.err)) << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("storage tier")) << backend;
  }
  const Outcome sim = Umlab(With({"run", "--device=g10-a100", "--format=json", "--capacity=0.5",
                                  "--device-param", "host_gib=0.001"}));
  ASSERT_EQ(sim.code, kExitOk) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr("\"capacity_bytes\":6291456,"));
  // Without --capacity, the preset's 40 GiB of GPU memory.
  const Outcome whole = Umlab(With({"run", "--device=g10-a100", "--format=json"}));
  ASSERT_EQ(whole.code, kExitOk) << whole.err;
  EXPECT_THAT(whole.out, HasSubstr("\"capacity_bytes\":42949672960,"));
  ASSERT_EQ(sim.code, kExitOk) << sim.err;
  EXPECT_THAT(sim.out, HasSubstr("\"storage_write_bytes\""));
  EXPECT_THAT(sim.out, Not(HasSubstr("\"storage_write_bytes\":0,")));
}

TEST(CliTest, AG10ConfigFileIsADeviceWithItsGpuMemoryAsTheCapacity) {
  const std::string path = TempPath("machine.config");
  {
    std::ofstream file(path);
    file << "system_latency_us 45\nGPU_memory_size_GB 0.005859375\nCPU_memory_line_GB 0\n"
         << "eviction_policy LRU\n";
  }
  const Outcome run = Umlab(With({"run", "--device=" + path, "--format=json"}));
  ASSERT_EQ(run.code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"capacity_bytes\":6291456,"));
  EXPECT_THAT(run.out, HasSubstr("\"device\":\"" + path + "\""));
  // No host memory: every write-back goes to storage.
  EXPECT_THAT(run.out, Not(HasSubstr("\"storage_write_bytes\":0,")));
  const Outcome sized = Umlab(With({"run", "--device=" + path, "--capacity=0.75", "--format=json"}));
  ASSERT_EQ(sized.code, kExitOk) << sized.err;
  EXPECT_THAT(sized.out, HasSubstr("\"capacity_bytes\":8388608,"));
  const Outcome missing = Umlab(With({"run", "--device=/nonexistent/x.config"}));
  EXPECT_EQ(missing.code, kExitUsage);
  EXPECT_TRUE(IsOneLine(missing.err)) << missing.err;
  std::remove(path.c_str());
}

TEST(CliTest, ListingsNameTheirEntries) {
  EXPECT_THAT(Umlab({"policies"}).out, HasSubstr("demand"));
  EXPECT_THAT(Umlab({"workloads"}).out, HasSubstr("mlp"));
  EXPECT_THAT(Umlab({"devices"}).out, HasSubstr("h2d_gbps"));
  EXPECT_THAT(Umlab({"backends"}).out, HasSubstr("sim"));
  const Outcome describe = Umlab({"workloads", "--describe", "mlp"});
  EXPECT_EQ(describe.code, kExitOk);
  EXPECT_THAT(describe.out, HasSubstr("footprint"));
}

// `umlab snurhac`: a row per program, scheme and device count, the same for
// any --jobs, and one-line usage errors.
TEST(CliTest, SnurhacRunsGridProgramsOnSeveralDevices) {
  const std::vector<std::string> args = {"snurhac", "--app=gemm:scale=0.001", "--app=tpacf",
                                         "--scale=0.001", "--devices=1,2,8",
                                         "--schemes=none,sp-dp", "--format=json"};
  std::vector<std::string> one_job = args;
  one_job.push_back("--jobs=1");
  const Outcome first = Umlab(one_job);
  ASSERT_EQ(first.code, kExitOk) << first.err;
  EXPECT_THAT(first.out, HasSubstr("\"scheme\": \"SnuRHAC-SP-DP\""));
  EXPECT_THAT(first.out, HasSubstr("\"devices\": 8"));
  EXPECT_THAT(first.out, HasSubstr("\"per_device\""));
  std::vector<std::string> two_jobs = args;
  two_jobs.push_back("--jobs=2");
  EXPECT_EQ(Umlab(two_jobs).out, first.out);
  const Outcome table = Umlab({"snurhac", "--app=gemm", "--scale=0.001", "--devices=1,2"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_THAT(table.out, HasSubstr("vs 1 gpu"));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"snurhac", "--devices=33"},
        std::vector<std::string>{"snurhac", "--schemes=fast"},
        std::vector<std::string>{"snurhac", "--app=nope"},
        std::vector<std::string>{"snurhac", "--correlation=nope"},
        // The uffd cluster's limits (snurhac_uffd_test runs it).
        std::vector<std::string>{"snurhac", "--backend=uffd", "--devices=5"},
        std::vector<std::string>{"snurhac", "--backend=uffd", "--schemes=sp"},
        std::vector<std::string>{"snurhac", "--backend=nope"},
        std::vector<std::string>{"snurhac", "--verify"}}) {
    const Outcome outcome = Umlab(bad);
    EXPECT_EQ(outcome.code, kExitUsage) << bad[1];
    EXPECT_TRUE(IsOneLine(outcome.err)) << outcome.err;
  }
}

}  // namespace
}  // namespace umlab::cli
