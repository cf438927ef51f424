// The events a workload program is made of, and the events a backend
// observes while running one. A program is a stream of these; a `.umt` trace
// stores them; every backend consumes them.
#ifndef UMLAB_CORE_EVENT_H_
#define UMLAB_CORE_EVENT_H_

#include <cstdint>
#include <string>

#include "core/memory_units.h"

namespace umlab {

enum class AccessType : uint8_t { kRead = 0, kWrite = 1, kAtomic = 2 };

enum class EventKind : uint8_t {
  // --- Program events: what the workload does. ---
  kIterationBegin = 1,  // a = iteration index (0-based)
  kAlloc = 2,           // [address, address+size) reserved from the device (a segment)
  kFree = 3,            // [address, address+size) returned to the device
  kActivate = 4,        // the allocator hands [address, address+size) to a tensor (cause: its role)
  kDeactivate = 5,      // the allocator frees that range: its bytes are now garbage
  kKernelDefine = 6,    // exec_id gets `name` (cause: its KernelPlace); precedes its first begin
  kKernelBegin = 7,     // exec_id starts; `duration_ns` is its pure compute time
  kAccess = 8,          // the running kernel touches [address, address+size)
  kKernelEnd = 9,       // exec_id ends
  // exec_id's compute time as measured on a GPU with its pages faulted in
  // (G10's per-kernel files): `duration_ns` with its inputs and outputs on
  // the host (cudnn<B>PF.txt), `time_ns` with only its outputs faulted
  // (cudnn<B>InputPF.txt). Optional; precedes the first begin of that id.
  // The sim's G10 fault model (`faults=g10`) charges faults from these.
  kKernelFaultTimes = 10,
  // A copy between a host buffer [host_address, host_address+size) and a
  // device buffer [address, address+size), as cudaMemcpy or cudaMemcpyAsync
  // makes it: cause is its CopyDirection, plus kCopyAsync for an async one
  // (core/copy_command.h). Issued by the host in program order, outside
  // kernels.
  kCopy = 11,
  // cudaDeviceSynchronize: the host waits until every copy and kernel
  // issued before it has finished.
  kSync = 12,
  // --- Observed events: what a backend saw while running the program. ---
  kFault = 16,       // a fault-buffer entry: address (page), access, sm, time_ns
  kMigrate = 17,     // size bytes moved host->device into block at address
  kEvict = 18,       // size bytes written back device->host from block at address
  kInvalidate = 19,  // size bytes dropped without write-back from block at address
};

// Where a kernel runs, carried in Event::cause for kKernelDefine. A host
// kernel is CPU work in the program's order (an optimizer step on the CPU,
// a host loop between copies): its `duration_ns` is CPU time and its
// accesses are the CPU's. Under UVM a CPU access to a page on the device
// takes the page back to host memory first (written back if the device
// dirtied it), and the page stays there until the device touches it again.
enum class KernelPlace : uint8_t { kDevice = 0, kHost = 1 };

// Why a migration happened, carried in Event::cause for kMigrate.
enum class MigrationCause : uint8_t { kFault = 0, kPrefetch = 1 };

// One event. Fields that a kind does not use are zero. Kept flat (no
// variant) because the simulator copies millions of them.
struct Event {
  EventKind kind = EventKind::kIterationBegin;
  AccessType access = AccessType::kRead;  // kAccess, kFault
  uint8_t cause = 0;                      // kMigrate: a MigrationCause; kActivate: the
                                          // tensor's role + 1, 0 if unknown (tensor_role.h);
                                          // kKernelDefine: a KernelPlace; kCopy: its
                                          // direction and mode (copy_command.h)
  uint32_t exec_id = 0;                   // kernel events, kFault
  uint32_t sm = 0;                        // kFault: the faulting SM
  uint64_t address = 0;                   // bytes
  uint64_t size = 0;                      // bytes
  uint64_t iteration = 0;                 // kIterationBegin
  Nanos duration_ns = 0;                  // kKernelBegin: compute time (and kKernelFaultTimes)
  Nanos time_ns = 0;                      // observed events: when it happened (and kKernelFaultTimes)
  std::string name;                       // kKernelDefine only
  // kAccess: further passes the kernel makes over the range after the
  // first (a GEMM reads its weight once per tile of its input's rows). Only
  // remote accesses pay for them: a kernel's compute time already counts
  // its device-memory traffic.
  uint32_t rereads = 0;
  // kCopy: the host buffer's first byte (host memory outside the managed
  // space that `address` lies in).
  uint64_t host_address = 0;

  bool IsProgramEvent() const { return static_cast<uint8_t>(kind) < 16; }
  bool operator==(const Event&) const = default;
};

// Human-readable name of a kind, for `inspect` and error messages.
const char* EventKindName(EventKind kind);

}  // namespace umlab

#endif  // UMLAB_CORE_EVENT_H_
