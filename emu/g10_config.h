// G10's own configuration file (its artifact's src/configs/*.config, the
// keys genconfigs.py writes) read as a device, so a G10 user can bring the
// machine they simulated: `--device=PATH.config`.
//
// The file is G10's: one `key value` per line, `#` or an empty line for a
// comment, and every key one G10's simulator knows (an unknown key is an
// error there and here). The machine's keys start from the g10-a100 preset:
//   system_latency_us                          fault_latency_us
//   CPU_PCIe_bandwidth_GBps, GPU_PCIe_..._GBps h2d and d2h: the smaller of the two
//   PCIe_latency_us                            link_latency_us
//   CPU_memory_line_GB                         host_gib (GiB, as G10 counts)
//   SSD_PCIe_bandwidth_GBps                    ssd_read_gbps and ssd_write_gbps
//   SSD_read_latency_us, SSD_write_latency_us  ssd_read_us, ssd_write_us
//   GPU_memory_size_GB                         memory_gib: the default capacity (GiB)
// The rest describe G10's experiment (its model files, policy and output)
// or parts of its model umlab does not have (GPU_frequency_GHz for its
// cycle clock, GPU_malloc_uspB and GPU_free_uspB, PCIe_batch_size_page,
// SSD_latency_us, which only splits its fault-time bandwidth): they are
// listed in `ignored`, for the caller to say so.
#ifndef UMLAB_EMU_G10_CONFIG_H_
#define UMLAB_EMU_G10_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/device_config.h"

namespace umlab {

struct G10Machine {
  DeviceConfig device;
  std::vector<std::string> ignored;  // keys read but not applied, in file order
};

// Parses the text of a G10 config file; `source` names it in errors.
absl::StatusOr<G10Machine> ParseG10Config(absl::string_view text, absl::string_view source);

// Reads and parses the file at `path`.
absl::StatusOr<G10Machine> ReadG10Config(const std::string& path);

}  // namespace umlab

#endif  // UMLAB_EMU_G10_CONFIG_H_
