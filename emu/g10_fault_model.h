// G10's fault-time model: what its simulator charges a kernel for the pages
// it finds missing at its start (`KernelBeginEvent::getPageFaultTime` and
// `performance_model` in the artifact's src/simulationEvents.cc).
//
// G10 does not simulate faults. It measured every kernel three times on an
// A100: with all its pages resident (ideal), with its inputs resident and its
// outputs faulted in (InputPF), and with everything faulted in from the host
// (PF). From those it derives the rate at which that kernel took in faulted
// input bytes, s_input / (PF - InputPF), and output bytes,
// s_output / (InputPF - ideal), and charges the fraction of each that is
// missing at that rate. Pages from storage are charged at the host rate
// scaled by l_sys / (l_sys + l_ssd), capped at the drive's bandwidth; host
// pages at most at the link's bandwidth less the drive's share; storage and
// host faults overlap. The 45 us fault latency is never paid per fault: it
// only sets the storage share.
//
// That is the model as the paper describes it (G10Times::kMeasured). The
// artifact's arithmetic differs: it turns each measured time into
// milliseconds as `cycles / GPU_frequency_Hz * 1000` with both operands
// integers, so the division truncates to whole seconds first. A time under
// one second reads as 0 ms and a longer one as whole seconds. Nearly every
// kernel (all but one of BERT_Base's, 1,120 of ResNet152's 1,299 have PF
// under 1 s) then has PF = InputPF = ideal = 0, G10's "unbounded" rate, and
// so faults at the link's full bandwidth (the drive's for storage pages).
// G10's published figures come from that arithmetic (G10Times::kArtifact).
#ifndef UMLAB_EMU_G10_FAULT_MODEL_H_
#define UMLAB_EMU_G10_FAULT_MODEL_H_

#include <cstdint>

#include "core/device_config.h"
#include "core/memory_units.h"

namespace umlab {

// Which times the model reads: the artifact's truncated ones, which its
// published figures used, or the measured ones, as the paper describes.
enum class G10Times { kArtifact, kMeasured };

// One kernel as G10's model sees it at its start.
struct G10KernelFaults {
  // The kernel's measured times (G10 clamps pf >= input_pf >= ideal).
  Nanos ideal_ns = 0;
  Nanos input_pf_ns = 0;
  Nanos pf_ns = 0;
  // Pages of its input and output tensors.
  uint64_t input_pages = 0;
  uint64_t output_pages = 0;
  // Of those, the pages neither on the device nor on their way there, and
  // of the missing ones, those whose data is in storage.
  uint64_t missing_input_pages = 0;
  uint64_t missing_output_pages = 0;
  uint64_t storage_input_pages = 0;
  uint64_t storage_output_pages = 0;
};

// The time G10 adds to the kernel's ideal time for its missing pages, on
// `device` (its link's host-to-device bandwidth, its storage's read
// bandwidth and latency, and fault_latency_ns as G10's system latency).
Nanos G10FaultTime(const G10KernelFaults& kernel, const DeviceConfig& device,
                   G10Times times = G10Times::kArtifact);

}  // namespace umlab

#endif  // UMLAB_EMU_G10_FAULT_MODEL_H_
