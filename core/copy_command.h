// A program's explicit copy between a host buffer and a device buffer
// (EventKind::kCopy), as a CUDA program makes it with cudaMemcpy or
// cudaMemcpyAsync, and the ways a run may carry it out (CopyMode).
//
// The device buffer is memory the program allocated on the device (inside a
// kAlloc segment: cudaMalloc's memory), which the engine tracks like every
// managed range. The host buffer is host memory outside that space
// (malloc's): the engine never tracks it, only host kernels touch it, and it
// matters only to the copies that read or fill it (docs/hum.md).
#ifndef UMLAB_CORE_COPY_COMMAND_H_
#define UMLAB_CORE_COPY_COMMAND_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/event.h"

namespace umlab {

enum class CopyDirection : uint8_t { kHostToDevice = 0, kDeviceToHost = 1 };

// kCopy's cause is its direction, plus this bit for cudaMemcpyAsync.
inline constexpr uint8_t kCopyAsync = 2;

// A copy's number among the program's copies, from 0, in program order.
using CopyId = uint64_t;

struct CopyCommand {
  CopyDirection direction = CopyDirection::kHostToDevice;
  // cudaMemcpyAsync: the host goes on once the copy is queued on the
  // stream; cudaMemcpy holds it until the copy is done.
  bool async = false;
  uint64_t device_address = 0;
  uint64_t host_address = 0;
  uint64_t size = 0;

  bool to_device() const { return direction == CopyDirection::kHostToDevice; }
  // The kCopy event that carries it.
  Event ToEvent() const;
};

// The copy a kCopy event describes, or why the event is malformed: a cause
// with bits other than a direction and kCopyAsync, no bytes, or a buffer
// that wraps around the address space.
absl::StatusOr<CopyCommand> CopyOf(const Event& event);

// How a run carries a copy out (Policy::HowToCopy).
enum class CopyMode : uint8_t {
  // The program as unified memory runs it (the thesis's CUDA-UM: cudaMalloc
  // became cudaMallocManaged and the copies were removed): the host's own
  // access of the device buffer, at once and in program order. A
  // host-to-device copy writes its destination (the program's data is
  // written there instead of into the host buffer), a device-to-host copy
  // reads its source; each is a host kernel of no duration (docs/engine.md,
  // "Host kernels"), and the device faults the pages in when its kernels
  // touch them.
  kHostAccess,
  // The program as written: the device buffer is device memory (a policy
  // that copies this way keeps it resident), and the copy is one DMA over
  // the link at its copy rate, after the stream's earlier copies. A
  // synchronous one holds the host until it is done.
  kDma,
  // HUM's hidden copy (host to device only): the host goes on at once; host
  // threads stage the data in host memory 2 MB at a time and a migration
  // thread moves each staged chunk to the device, while the destination's
  // pages await it (a kernel that touches one first waits for it to land)
  // and the source is write-protected until the copy has landed.
  kHidden,
};

const char* CopyModeName(CopyMode mode);

}  // namespace umlab

#endif  // UMLAB_CORE_COPY_COMMAND_H_
