// Hand-built programs for tests: a few blocks, kernels and accesses whose
// right answers can be worked out on paper.
#ifndef UMLAB_TESTS_PROGRAM_BUILDER_H_
#define UMLAB_TESTS_PROGRAM_BUILDER_H_

#include <string>
#include <vector>

#include "core/copy_command.h"
#include "core/event.h"
#include "core/event_source.h"
#include "core/memory_units.h"

namespace umlab::testing {

// Replays a fixed list of events.
class VectorSource final : public EventSource {
 public:
  explicit VectorSource(std::vector<Event> events) : events_(std::move(events)) {}
  bool Next(Event& event) override {
    if (next_ == events_.size()) return false;
    event = events_[next_++];
    return true;
  }

 private:
  std::vector<Event> events_;
  size_t next_ = 0;
};

class ProgramBuilder {
 public:
  // Device addresses start here, 2 MB aligned.
  static constexpr uint64_t kBase = 0x100000000ull;

  static uint64_t BlockAddress(int block) { return kBase + uint64_t(block) * kBlockSize; }

  ProgramBuilder& Alloc(int first_block, int blocks) {
    return Add(EventKind::kAlloc, BlockAddress(first_block), uint64_t(blocks) * kBlockSize);
  }
  ProgramBuilder& Free(int first_block, int blocks) {
    return Add(EventKind::kFree, BlockAddress(first_block), uint64_t(blocks) * kBlockSize);
  }
  // `cause`: the tensor's role as core/tensor_role.h encodes it (0: none).
  ProgramBuilder& Activate(uint64_t address, uint64_t size, uint8_t cause = 0) {
    Add(EventKind::kActivate, address, size);
    events_.back().cause = cause;
    return *this;
  }
  ProgramBuilder& Deactivate(uint64_t address, uint64_t size) {
    return Add(EventKind::kDeactivate, address, size);
  }
  ProgramBuilder& Iteration(uint64_t index) {
    Event event;
    event.kind = EventKind::kIterationBegin;
    event.iteration = index;
    events_.push_back(event);
    return *this;
  }
  // A kernel that touches whole blocks in order.
  ProgramBuilder& Kernel(uint32_t exec_id, Nanos compute_ns, const std::vector<int>& blocks,
                         bool write = false) {
    Begin(exec_id, compute_ns);
    for (int block : blocks) Access(BlockAddress(block), kBlockSize, write);
    return End(exec_id);
  }
  // Defines `exec_id` as a host kernel (KernelPlace::kHost): its launches
  // are CPU work. Must come before its first begin.
  ProgramBuilder& OnHost(uint32_t exec_id) {
    Event event;
    event.kind = EventKind::kKernelDefine;
    event.exec_id = exec_id;
    event.name = "host_kernel";
    event.cause = static_cast<uint8_t>(KernelPlace::kHost);
    events_.push_back(event);
    return *this;
  }
  ProgramBuilder& Begin(uint32_t exec_id, Nanos compute_ns) {
    Event event;
    event.kind = EventKind::kKernelBegin;
    event.exec_id = exec_id;
    event.duration_ns = compute_ns;
    events_.push_back(event);
    return *this;
  }
  ProgramBuilder& Access(uint64_t address, uint64_t size, bool write) {
    Event event;
    event.kind = EventKind::kAccess;
    event.address = address;
    event.size = size;
    event.access = write ? AccessType::kWrite : AccessType::kRead;
    events_.push_back(event);
    return *this;
  }
  ProgramBuilder& End(uint32_t exec_id) {
    Event event;
    event.kind = EventKind::kKernelEnd;
    event.exec_id = exec_id;
    events_.push_back(event);
    return *this;
  }

  // A copy of `size` bytes between the host buffer at `host_address` and
  // the device buffer at `device_address` (cudaMemcpy, or cudaMemcpyAsync
  // with `async`).
  ProgramBuilder& Copy(CopyDirection direction, uint64_t device_address, uint64_t host_address,
                       uint64_t size, bool async = false) {
    events_.push_back(CopyCommand{direction, async, device_address, host_address, size}.ToEvent());
    return *this;
  }
  // cudaDeviceSynchronize.
  ProgramBuilder& Sync() {
    Event event;
    event.kind = EventKind::kSync;
    events_.push_back(event);
    return *this;
  }

  // The kernel's times measured with faults (G10's PF and InputPF), for the
  // sim's G10 fault models.
  ProgramBuilder& FaultTimes(uint32_t exec_id, Nanos pf_ns, Nanos input_pf_ns) {
    Event event;
    event.kind = EventKind::kKernelFaultTimes;
    event.exec_id = exec_id;
    event.duration_ns = pf_ns;
    event.time_ns = input_pf_ns;
    events_.push_back(event);
    return *this;
  }

  // Any event, as given (a kKernelDefine, an atomic access).
  ProgramBuilder& Raw(const Event& event) {
    events_.push_back(event);
    return *this;
  }

  const std::vector<Event>& events() const { return events_; }
  VectorSource Source() const { return VectorSource(events_); }

  // One 4 KiB access of a page drawn uniformly from the first `blocks`
  // blocks, a read or a write as likely: the random traffic of the uffd
  // stress test and soak. Draws the page, then the kind.
  template <typename Rng>
  static Event RandomPageAccess(Rng& rng, int blocks) {
    Event event;
    const uint64_t page = rng() % (static_cast<uint64_t>(blocks) * kPagesPerBlock);
    event.kind = EventKind::kAccess;
    event.address = kBase + page * kPageSize;
    event.size = kPageSize;
    event.access = rng() % 2 ? AccessType::kWrite : AccessType::kRead;
    return event;
  }

 private:
  ProgramBuilder& Add(EventKind kind, uint64_t address, uint64_t size) {
    Event event;
    event.kind = kind;
    event.address = address;
    event.size = size;
    events_.push_back(event);
    return *this;
  }

  std::vector<Event> events_;
};

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_PROGRAM_BUILDER_H_
