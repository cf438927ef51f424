// Parameter ranges, the registries' uniqueness and traits, and the device
// preset registry.
#include <string>
#include <vector>

#include "core/backend_registry.h"
#include "core/param_map.h"
#include "core/policy.h"
#include "emu/device_presets.h"
#include "emu/g10_config.h"
#include "gtest/gtest.h"
#include "workloads/grid_workload.h"
#include "workloads/workload.h"

namespace umlab {
namespace {

TEST(ParamRangeTest, ContainsHonoursOpenAndClosedEnds) {
  const ParamRange closed = ParamRange::Closed(1, 64);
  EXPECT_FALSE(closed.Contains(0));
  EXPECT_TRUE(closed.Contains(1));
  EXPECT_TRUE(closed.Contains(64));
  EXPECT_FALSE(closed.Contains(65));
  const ParamRange half_open = ParamRange::ClosedOpen(0, 1);
  EXPECT_TRUE(half_open.Contains(0));
  EXPECT_TRUE(half_open.Contains(0.999));
  EXPECT_FALSE(half_open.Contains(1));
  EXPECT_FALSE(ParamRange::Positive().Contains(0));
  EXPECT_TRUE(ParamRange::Positive().Contains(1e-9));
  EXPECT_TRUE(ParamRange::AtLeast(0).Contains(0));
  EXPECT_FALSE(ParamRange::AtLeast(0).Contains(-1e-9));
  EXPECT_TRUE(ParamRange{}.Contains(-1e300));
  EXPECT_FALSE(ParamRange{}.bounded());
  EXPECT_TRUE(ParamRange::AtLeast(0).bounded());
}

TEST(ParamRangeTest, PrintsIntervalNotation) {
  EXPECT_EQ(ParamRange::Closed(1, 4194304).ToString(), "[1, 4194304]");
  EXPECT_EQ(ParamRange::OpenClosed(0, 10).ToString(), "(0, 10]");
  EXPECT_EQ(ParamRange::ClosedOpen(0, 1).ToString(), "[0, 1)");
  EXPECT_EQ(ParamRange::Positive().ToString(), "(0, inf)");
  EXPECT_EQ(ParamRange::AtLeast(0.5).ToString(), "[0.5, inf)");
}

const std::vector<ParamInfo>& Declared() {
  static const std::vector<ParamInfo>* declared = new std::vector<ParamInfo>{
      {"rows", ParamType::kInt, "2048", "rows", ParamRange::Closed(1, 1 << 22)},
      {"fraction", ParamType::kDouble, "0.25", "fraction", ParamRange::ClosedOpen(0, 1)},
      {"size", ParamType::kBytes, "64KiB", "size", ParamRange::Closed(4096, 2 << 20)},
      {"free", ParamType::kInt, "-5", "unbounded"},
  };
  return *declared;
}

TEST(ParamMapRangeTest, AcceptsValuesInRange) {
  absl::StatusOr<ParamMap> params =
      ParamMap::Resolve(Declared(), "rows=1,fraction=0,size=2MiB,free=-99", "policy test");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->Int("rows"), 1);
  EXPECT_EQ(params->Double("fraction"), 0);
  EXPECT_EQ(params->Bytes("size"), 2u << 20);
  EXPECT_EQ(params->Int("free"), -99);
}

TEST(ParamMapRangeTest, RejectsValuesOutOfRangeWithOneLine) {
  struct Case {
    const char* overrides;
    const char* message;
  };
  for (const Case& c : {
           Case{"rows=0", "policy test: parameter rows=0 is out of range; allowed: [1, 4194304]"},
           Case{"rows=4194305",
                "policy test: parameter rows=4194305 is out of range; allowed: [1, 4194304]"},
           Case{"fraction=1",
                "policy test: parameter fraction=1 is out of range; allowed: [0, 1)"},
           Case{"size=4MiB",
                "policy test: parameter size=4MiB is out of range; allowed: [4096, 2097152]"},
       }) {
    absl::StatusOr<ParamMap> params = ParamMap::Resolve(Declared(), c.overrides, "policy test");
    ASSERT_FALSE(params.ok()) << c.overrides;
    EXPECT_EQ(params.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(params.status().message(), c.message);
  }
}

TEST(ParamMapChoiceTest, AcceptsOnlyDeclaredChoicesAndIndexesThem) {
  const std::vector<ParamInfo> declared = {
      {"mode", ParamType::kString, "fast", "how", {}, {"fast", "exact", "lazy"}},
      {"label", ParamType::kString, "", "any string"}};
  absl::StatusOr<ParamMap> params = ParamMap::Resolve(declared, "mode=lazy,label=x", "policy t");
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->Choice("mode"), 2u);
  EXPECT_EQ(ParamMap::Resolve(declared, "", "policy t")->Choice("mode"), 0u);
  absl::StatusOr<ParamMap> bad = ParamMap::Resolve(declared, "mode=slow", "policy t");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "policy t: parameter mode=slow is not one of: fast, exact, lazy");
  // A default outside its own choices is caught too.
  const std::vector<ParamInfo> wrong_default = {
      {"mode", ParamType::kString, "quick", "how", {}, {"fast", "exact"}}};
  EXPECT_FALSE(ParamMap::Resolve(wrong_default, "", "policy t").ok());
}

TEST(ParamMapRangeTest, RejectsADefaultOutsideItsOwnRange) {
  const std::vector<ParamInfo> bad = {
      {"n", ParamType::kInt, "0", "kernels", ParamRange::Closed(1, 8)}};
  absl::StatusOr<ParamMap> params = ParamMap::Resolve(bad, "", "workload test");
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.status().message(),
            "workload test: parameter n=0 is out of range; allowed: [1, 8]");
}

// Every declared default resolves (so lies in its own range), and only
// numeric parameters carry a range.
void ExpectDefaultsValid(const std::string& owner, const std::vector<ParamInfo>& params) {
  absl::StatusOr<ParamMap> resolved = ParamMap::Resolve(params, "", owner);
  EXPECT_TRUE(resolved.ok()) << owner << ": " << resolved.status();
  for (const ParamInfo& p : params) {
    if (p.type == ParamType::kBool || p.type == ParamType::kString) {
      EXPECT_FALSE(p.range.bounded()) << owner << " " << p.name << " is not a number";
    }
  }
}

TEST(RegistryRangesTest, EveryRegisteredDefaultLiesInItsRange) {
  size_t checked = 0;
  for (const auto* entry : Policies().Entries()) {
    ExpectDefaultsValid("policy " + entry->name, entry->params);
    ++checked;
  }
  for (const auto* entry : Workloads().Entries()) {
    ExpectDefaultsValid("workload " + entry->name, entry->params);
    ++checked;
  }
  for (const auto* entry : GridWorkloads().Entries()) {
    ExpectDefaultsValid("grid program " + entry->name, entry->params);
    ++checked;
  }
  for (const auto* entry : Backends().Entries()) {
    ExpectDefaultsValid("backend " + entry->name, entry->params);
    ++checked;
  }
  for (const DevicePresetEntry* entry : DevicePresets().Entries()) {
    ExpectDefaultsValid("device " + entry->name,
                        DeviceParams(*DevicePreset(entry->name)));
    ++checked;
  }
  // The policies (5), workloads (20), backends (sim at least) and presets (3).
  EXPECT_GE(checked, 5u + 20u + 1u + 3u);
}

TEST(RegistryRangesTest, FactoriesNoLongerSeeOutOfRangeValues) {
  absl::StatusOr<std::unique_ptr<Policy>> policy = Policies().Create("deepum:assoc=65");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().message(),
            "policy deepum: parameter assoc=65 is out of range; allowed: [1, 64]");
  absl::StatusOr<std::unique_ptr<Workload>> workload =
      Workloads().Create("dlrm:zipf=0", ComputeSpec{});
  ASSERT_FALSE(workload.ok());
  EXPECT_EQ(workload.status().message(),
            "workload dlrm: parameter zipf=0 is out of range; allowed: (0, 10]");
  absl::StatusOr<DeviceConfig> device =
      ApplyDeviceOverrides(*DevicePreset("h200"), "fault_latency_us=-1");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().message(),
            "device h200: parameter fault_latency_us=-1 is out of range; allowed: [0, 1000000000000]");
}

TEST(DevicePresetsTest, LooksUpRegisteredPresetsByName) {
  EXPECT_EQ(DevicePresets().Names(), "a100-pcie4, g10-a100, h200, v100-nvlink2, v100-pcie3");
  absl::StatusOr<DeviceConfig> h200 = DevicePreset("h200");
  ASSERT_TRUE(h200.ok());
  EXPECT_EQ(h200->name, "h200");
  EXPECT_EQ(h200->link.h2d_bytes_per_second, 14.9e9);
  EXPECT_EQ(h200->link.d2h_bytes_per_second, 12.3e9);
  EXPECT_EQ(h200->link.latency_ns, 10000);
  // An isolated fault's 20 us of handling: the wake, then the rest.
  EXPECT_EQ(h200->fault_wake_ns + h200->fault_latency_ns, 20000);
  EXPECT_EQ(h200->fault_write_ns, 20);
  EXPECT_EQ(h200->replay_flush, DeviceConfig::ReplayFlush::kDriver);
  EXPECT_EQ(h200->compute.sm_count, 132);
  EXPECT_EQ(h200->fault_batch_size, 256);  // DeviceConfig's default
  absl::StatusOr<DeviceConfig> v100 = DevicePreset("v100-pcie3");
  ASSERT_TRUE(v100.ok());
  EXPECT_EQ(v100->link.h2d_bytes_per_second, 15.754e9);
  EXPECT_EQ(v100->fault_latency_ns, 45000);
  EXPECT_EQ(v100->replay_flush, DeviceConfig::ReplayFlush::kAll);  // the sim's first model
  EXPECT_EQ(v100->fault_write_ns, 0);
  EXPECT_EQ(v100->compute.sm_count, 80);
  // The LMS paper's NVLink machine: the same V100, 75 GB/s each way.
  absl::StatusOr<DeviceConfig> nvlink = DevicePreset("v100-nvlink2");
  ASSERT_TRUE(nvlink.ok());
  EXPECT_EQ(nvlink->link.h2d_bytes_per_second, 75e9);
  EXPECT_EQ(nvlink->link.d2h_bytes_per_second, 75e9);
  EXPECT_EQ(nvlink->compute.sm_count, v100->compute.sm_count);
  absl::StatusOr<DeviceConfig> unknown = DevicePreset("b200");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "unknown device 'b200'; presets: a100-pcie4, g10-a100, h200, v100-nvlink2, v100-pcie3");
  for (const DevicePresetEntry* entry : DevicePresets().Entries()) {
    EXPECT_FALSE(entry->description.empty()) << entry->name;
  }
  // G10's Table 2 machine, the only preset with storage behind it.
  absl::StatusOr<DeviceConfig> g10 = DevicePreset("g10-a100");
  ASSERT_TRUE(g10.ok());
  EXPECT_TRUE(g10->link.storage.present);
  EXPECT_EQ(g10->link.storage.read_bytes_per_second, 3.2e9);
  EXPECT_EQ(g10->link.storage.write_bytes_per_second, 3.0e9);
  EXPECT_EQ(g10->link.storage.read_latency_ns, 20000);
  EXPECT_EQ(g10->link.storage.write_latency_ns, 16000);
  EXPECT_EQ(g10->host_memory_bytes, 128ull << 30);
  EXPECT_EQ(g10->memory_bytes, 40ull << 30);
  EXPECT_EQ(h200->memory_bytes, 0u);
  EXPECT_EQ(g10->link.h2d_bytes_per_second, 15.754e9);
  EXPECT_EQ(g10->fault_latency_ns, 45000);
  EXPECT_FALSE(h200->link.storage.present);
}

TEST(DevicePresetsTest, StorageParamsOverrideThePreset) {
  absl::StatusOr<DeviceConfig> device = ApplyDeviceOverrides(
      *DevicePreset("h200"), "ssd=true,host_gib=0.5,ssd_read_gbps=7,ssd_write_us=30");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(device->link.storage.present);
  EXPECT_EQ(device->host_memory_bytes, 512ull << 20);
  EXPECT_EQ(device->link.storage.read_bytes_per_second, 7e9);
  EXPECT_EQ(device->link.storage.write_latency_ns, 30000);
  EXPECT_FALSE(ApplyDeviceOverrides(*DevicePreset("h200"), "ssd_read_gbps=0").ok());
}

// G10's artifact's src/configs/example.config, as genconfigs.py writes them.
constexpr char kG10ExampleConfig[] = R"(output_folder           ../results/Inceptionv3/1536-prefetch_lru
is_simulation           1

is_inception            1
batch_size              1536
nn_model_input_file     ../frontend/Nets/Inceptionv3.txt
is_UVM                  1
use_prefetch            1
eviction_policy         LRU

system_latency_us       45

CPU_PCIe_bandwidth_GBps 15.754
CPU_memory_line_GB      128

GPU_memory_size_GB      40
GPU_frequency_GHz       1.2
GPU_PCIe_bandwidth_GBps 15.754
GPU_malloc_uspB         0.000000814
GPU_free_uspB           0

SSD_PCIe_bandwidth_GBps 3.2
SSD_read_latency_us     12
SSD_write_latency_us    16
SSD_latency_us          20

PCIe_latency_us         5
PCIe_batch_size_page    50

delta_parameter         0.5
)";

TEST(G10ConfigTest, ReadsTheMachineOfG10sExampleConfig) {
  absl::StatusOr<G10Machine> machine = ParseG10Config(kG10ExampleConfig, "example.config");
  ASSERT_TRUE(machine.ok()) << machine.status();
  const DeviceConfig& d = machine->device;
  EXPECT_EQ(d.name, "example.config");
  EXPECT_EQ(d.fault_latency_ns, 45000);
  EXPECT_EQ(d.link.h2d_bytes_per_second, 15.754e9);
  EXPECT_EQ(d.link.d2h_bytes_per_second, 15.754e9);
  EXPECT_EQ(d.link.latency_ns, 5000);
  EXPECT_TRUE(d.link.storage.present);
  EXPECT_EQ(d.link.storage.read_bytes_per_second, 3.2e9);
  EXPECT_EQ(d.link.storage.write_bytes_per_second, 3.2e9);
  EXPECT_EQ(d.link.storage.read_latency_ns, 12000);
  EXPECT_EQ(d.link.storage.write_latency_ns, 16000);
  EXPECT_EQ(d.host_memory_bytes, 128ull << 30);
  EXPECT_EQ(d.memory_bytes, 40ull << 30);
  EXPECT_EQ(d.compute.sm_count, 108);  // the g10-a100 preset's
  EXPECT_EQ(machine->ignored.front(), "output_folder");
  EXPECT_EQ(machine->ignored.back(), "delta_parameter");
  EXPECT_EQ(machine->ignored.size(), 14u);
}

TEST(G10ConfigTest, HostTrafficTakesTheSlowerPcieAndCommentsAreSkipped) {
  absl::StatusOr<G10Machine> machine = ParseG10Config(
      "# a comment\n#another\n\nCPU_PCIe_bandwidth_GBps 8\nGPU_PCIe_bandwidth_GBps 32\n"
      "CPU_memory_line_GB 0\n",
      "slow-host.config");
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->device.link.h2d_bytes_per_second, 8e9);
  EXPECT_EQ(machine->device.host_memory_bytes, 0u);  // G10GDSSSD: all to storage
  EXPECT_EQ(machine->device.memory_bytes, 40ull << 30);  // the g10-a100 preset's
}

TEST(G10ConfigTest, BadLinesAreOneLineErrorsWithTheirLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"system_latency_us 45\nGPU_memroy_size_GB 40\n", "x.config:2: G10's simulator knows no key 'GPU_memroy_size_GB'"},
      {"PCIe_latency_us fast\n", "x.config:1: expected one non-negative number after 'PCIe_latency_us'"},
      {"PCIe_latency_us -5\n", "x.config:1: expected one non-negative number after"},
      {"PCIe_latency_us 5 us\n", "x.config:1: expected one non-negative number after"},
      {"GPU_PCIe_bandwidth_GBps 0\n", "x.config: the PCIe bandwidth must be positive"},
      {"SSD_PCIe_bandwidth_GBps 0\n", "x.config: SSD_PCIe_bandwidth_GBps must be positive"},
      {"GPU_memory_size_GB 0\n", "x.config: GPU_memory_size_GB must be positive"},
      {"SSD_read_latency_us 1e300\n", "x.config:1: value out of range for 'SSD_read_latency_us'"},
      {"CPU_memory_line_GB 2e9\n", "x.config:1: value out of range for 'CPU_memory_line_GB'"},
  };
  for (const auto& [text, message] : bad) {
    absl::StatusOr<G10Machine> machine = ParseG10Config(text, "x.config");
    ASSERT_FALSE(machine.ok()) << text;
    EXPECT_EQ(machine.status().message().find(message), 0u) << machine.status();
    EXPECT_EQ(machine.status().message().find('\n'), std::string::npos);
  }
  EXPECT_FALSE(ReadG10Config("/nonexistent/g10.config").ok());
}

TEST(BackendTraitsTest, TheSimAndUffdModelAStorageTierAndTheGpuDoesNot) {
  ASSERT_NE(Backends().Find("sim"), nullptr);
  EXPECT_TRUE(Backends().Find("sim")->traits.storage_tier);
  if (const BackendRegistry::Entry* uffd = Backends().Find("uffd")) {
    EXPECT_TRUE(uffd->traits.storage_tier);
  }
  if (const BackendRegistry::Entry* cuda = Backends().Find("cuda")) {
    EXPECT_FALSE(cuda->traits.storage_tier);
  }
}

TEST(BackendTraitsTest, OnlyVirtualTimeBackendsRunInParallel) {
  const BackendRegistry::Entry* sim = Backends().Find("sim");
  ASSERT_NE(sim, nullptr);
  EXPECT_TRUE(sim->traits.parallel_runs);
  for (const char* real_time : {"uffd", "cuda"}) {
    if (const BackendRegistry::Entry* entry = Backends().Find(real_time)) {
      EXPECT_FALSE(entry->traits.parallel_runs) << real_time;
    }
  }
  EXPECT_FALSE(BackendTraits{}.parallel_runs) << "a new backend must opt in";
}

absl::StatusOr<std::unique_ptr<Policy>> NoPolicy(const ParamMap&) {
  return absl::UnimplementedError("never made");
}

// Outside the macros: their arguments cannot hold unparenthesised commas.
void RegisterPolicyTwice() {
  PolicyRegistry registry("policy");
  registry.Register({"twice", "first", {}, NoPolicy});
  registry.Register({"twice", "second", {}, NoPolicy});
}

void RegisterPresetTwice() {
  NamedIndex<DevicePresetEntry> presets("device preset");
  presets.Add({"h200", "first", DeviceConfig{}});
  presets.Add({"h200", "second", DeviceConfig{}});
}

TEST(RegistryDeathTest, DuplicateNameAbortsNamingKindAndName) {
  EXPECT_DEATH(RegisterPolicyTwice(),
               "umlab: policy 'twice' is registered twice; each name must be unique");
  EXPECT_DEATH(RegisterPresetTwice(), "umlab: device preset 'h200' is registered twice");
}

TEST(RegistryDeathTest, DistinctNamesRegister) {
  PolicyRegistry registry("policy");
  EXPECT_TRUE(registry.Register({"one", "first", {}, NoPolicy}));
  EXPECT_TRUE(registry.Register({"two", "second", {}, NoPolicy}));
  EXPECT_EQ(registry.Names(), "one, two");
}

}  // namespace
}  // namespace umlab
