// What every backend over the real UVM driver shares, whether it replays a
// program (CudaBackend) or watches a live PyTorch training (LiveBackend):
// the engine's transfers become the driver's prefetch, eviction and discard
// calls (DriverCalls); the faults the engine fetches are the blocks CUPTI's
// records say the driver brought in; the GPU keeps no dirty or accessed
// bits the host can read; and the hardware replays faults by itself. A
// backend supplies where a block's pages live in managed memory.
#ifndef UMLAB_BACKENDS_CUDA_UVM_DRIVER_BACKEND_H_
#define UMLAB_BACKENDS_CUDA_UVM_DRIVER_BACKEND_H_

#include <vector>

#include "backends/cuda/driver_calls.h"
#include "backends/cuda/driver_record_reader.h"
#include "core/backend.h"
#include "emu/fault_buffer.h"

namespace umlab::cuda {

class UvmDriverBackend : public Backend {
 public:
  void SetListener(TransferListener* listener) override { listener_ = listener; }
  size_t FetchFaults(absl::Span<FaultEntry> out) override { return faults_.Fetch(out); }
  void Migrate(const Transfer& transfer) override;
  void Evict(const Transfer& transfer) override;
  void Invalidate(BlockNumber block, const PageMask& pages) override;
  // Every resident page counts as dirty and used: UVM writes back whole
  // chunks.
  PageUse QueryUse(BlockNumber block) const override;
  // The hardware replays faults itself once the driver has serviced them.
  void Replay(ReplayPolicy, BlockNumber, Nanos) override {}
  // Traffic and faults are CUPTI's.
  bool CountsItsOwnTraffic() const override { return true; }
  // Remote mapping through the driver's advice: PreferredLocation=host and
  // AccessedBy=GPU, so the GPU maps the pages where they are.
  bool MapsRemotely() const override { return true; }
  void MapRemote(BlockNumber block, const PageMask& pages, const PageMask& fresh) override;
  void UnmapRemote(BlockNumber block, const PageMask& pages) override;

 protected:
  UvmDriverBackend();
  // The managed memory behind `pages` of `block`, one span per run; pages
  // with none are left out.
  virtual std::vector<DriverCalls::Span> Spans(BlockNumber block,
                                               const PageMask& pages) const = 0;
  // Hands finished transfers to the engine and lets it service the faults
  // waiting, until neither makes progress.
  void DeliverCompletions(DriverRecordReader& reader);

  // Counts the program's accesses of `write` to `pages` pages from
  // `first_page` that go to remotely mapped pages, in the run's remote
  // bytes (whole pages: the replay kernel and the plan are page-granular).
  void CountRemoteAccesses(PageNumber first_page, uint64_t pages, bool write);

  Engine* engine_ = nullptr;
  TransferListener* listener_ = nullptr;
  // Pages mapped remotely now: accesses need checking only while any are.
  uint64_t remote_pages_ = 0;
  // The GPU's own fault buffer is not modelled: this one only carries the
  // records' blocks to the engine, and must not drop any.
  FaultBuffer faults_;
  DriverCalls calls_;
};

}  // namespace umlab::cuda

#endif  // UMLAB_BACKENDS_CUDA_UVM_DRIVER_BACKEND_H_
