#include "emu/g10_fault_model.h"

#include <algorithm>
#include <cmath>

namespace umlab {

namespace {

// G10's stand-in for "faults cost this kernel nothing" when two of its
// measured times coincide, in bytes per millisecond.
constexpr double kUnboundedBytesPerMs = 1063004400;

// A measured time in milliseconds, as the model reads it.
double Ms(Nanos ns, G10Times times) {
  if (times == G10Times::kMeasured) return static_cast<double>(ns) / 1e6;
  // The artifact: whole seconds (integer cycles / integer Hz), then x 1000.
  return static_cast<double>(ns / 1000000000) * 1000;
}

}  // namespace

Nanos G10FaultTime(const G10KernelFaults& kernel, const DeviceConfig& device, G10Times times) {
  const double input_ratio =
      kernel.input_pages == 0
          ? 0
          : static_cast<double>(kernel.missing_input_pages) / static_cast<double>(kernel.input_pages);
  const double output_ratio =
      kernel.output_pages == 0 ? 0
                               : static_cast<double>(kernel.missing_output_pages) /
                                     static_cast<double>(kernel.output_pages);
  if (input_ratio == 0 && output_ratio == 0) return 0;
  const double input_storage_ratio =
      kernel.missing_input_pages == 0 ? 0
                                      : static_cast<double>(kernel.storage_input_pages) /
                                            static_cast<double>(kernel.missing_input_pages);
  const double output_storage_ratio =
      kernel.missing_output_pages == 0 ? 0
                                       : static_cast<double>(kernel.storage_output_pages) /
                                             static_cast<double>(kernel.missing_output_pages);
  const double input_bytes = static_cast<double>(kernel.input_pages * kPageSize);
  const double output_bytes = static_cast<double>(kernel.output_pages * kPageSize);

  // G10 clamps ideal <= InputPF <= PF (the workload clamps them already).
  const double ideal = Ms(kernel.ideal_ns, times);
  const double pf = std::max(ideal, Ms(kernel.pf_ns, times));
  const double input_pf = std::min(pf, std::max(ideal, Ms(kernel.input_pf_ns, times)));

  // Bytes per millisecond, as G10 computes them.
  const double link = device.link.h2d_bytes_per_second / 1e3;
  const double drive = device.link.storage.read_bytes_per_second / 1e3;
  // G10 passes both latencies as whole microseconds.
  const double system_us = std::trunc(static_cast<double>(device.fault_latency_ns) / 1e3);
  const double drive_us = std::trunc(static_cast<double>(device.link.storage.read_latency_ns) / 1e3);

  double host_in = pf == input_pf ? kUnboundedBytesPerMs : input_bytes / (pf - input_pf);
  double host_out = input_pf == ideal ? kUnboundedBytesPerMs : output_bytes / (input_pf - ideal);
  const double storage_share = system_us + drive_us == 0 ? 0 : system_us / (system_us + drive_us);
  double storage_in = std::min(host_in * storage_share, drive);
  double storage_out = std::min(host_out * storage_share, drive);
  if (input_storage_ratio == 0) storage_in = 0;
  if (output_storage_ratio == 0) storage_out = 0;
  // What the drive's transfers leave of the link. G10's configurations
  // always leave some; umlab keeps a sliver for one whose drive is faster
  // than its link, where G10's arithmetic would go negative.
  const double link_left = std::max(link - std::max(storage_in, storage_out), link * 1e-3);
  host_in = std::min(host_in, link_left);
  host_out = std::min(host_out, link_left);

  // A term with no missing bytes costs nothing (G10 divides 0 by a rate
  // that may itself be 0 there).
  auto time = [](double ratio, double share, double bytes, double rate) {
    const double moved = ratio * share * bytes;
    return moved == 0 ? 0.0 : moved / rate;
  };
  const double storage_ms = time(input_ratio, input_storage_ratio, input_bytes, storage_in) +
                            time(output_ratio, output_storage_ratio, output_bytes, storage_out);
  const double host_ms = time(input_ratio, 1 - input_storage_ratio, input_bytes, host_in) +
                         time(output_ratio, 1 - output_storage_ratio, output_bytes, host_out);
  return static_cast<Nanos>(std::max(storage_ms, host_ms) * 1e6);
}

}  // namespace umlab
