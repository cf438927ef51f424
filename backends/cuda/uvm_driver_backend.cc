#include "backends/cuda/uvm_driver_backend.h"

#include <algorithm>

#include "core/engine.h"

namespace umlab::cuda {

UvmDriverBackend::UvmDriverBackend() : faults_(size_t{1} << 20) {}

void UvmDriverBackend::Migrate(const Transfer& transfer) {
  calls_.Migrate(transfer, Spans(transfer.block, transfer.pages));
}

void UvmDriverBackend::Evict(const Transfer& transfer) {
  calls_.Evict(transfer, Spans(transfer.block, transfer.pages & ~transfer.copy),
               Spans(transfer.block, transfer.copy));
}

void UvmDriverBackend::Invalidate(BlockNumber block, const PageMask& pages) {
  std::vector<DriverCalls::Span> spans = Spans(block, pages);
  if (!spans.empty()) calls_.Discard(std::move(spans));
}

void UvmDriverBackend::MapRemote(BlockNumber block, const PageMask& pages,
                                 const PageMask& /*fresh: the replay kernel reads no data*/) {
  remote_pages_ += pages.count();
  std::vector<DriverCalls::Span> spans = Spans(block, pages);
  if (!spans.empty()) calls_.MapRemote(std::move(spans));
}

void UvmDriverBackend::UnmapRemote(BlockNumber block, const PageMask& pages) {
  remote_pages_ -= std::min<uint64_t>(remote_pages_, pages.count());
  std::vector<DriverCalls::Span> spans = Spans(block, pages);
  if (!spans.empty()) calls_.UnmapRemote(std::move(spans));
}

PageUse UvmDriverBackend::QueryUse(BlockNumber block) const {
  const BlockState* state = engine_ == nullptr ? nullptr : engine_->memory_state().Find(block);
  const PageMask resident = state == nullptr ? PageMask() : state->resident;
  return PageUse{resident, resident};
}

void UvmDriverBackend::CountRemoteAccesses(PageNumber first_page, uint64_t pages, bool write) {
  if (remote_pages_ == 0 || engine_ == nullptr || pages == 0) return;
  const MemoryView& memory = engine_->memory_state();
  uint64_t remote = 0;
  const PageNumber end = first_page + pages;
  for (PageNumber page = first_page; page < end;) {
    const BlockNumber block = BlockOfPage(page);
    const PageNumber block_end = std::min(end, FirstPageOfBlock(block + 1));
    if (const BlockState* state = memory.Find(block); state != nullptr && state->remote.any()) {
      remote += (state->remote & PageRangeMask(PageIndexInBlock(page),
                                               static_cast<int>(block_end - page)))
                    .count();
    }
    page = block_end;
  }
  RunStats& stats = engine_->mutable_stats();
  (write ? stats.remote_write_bytes : stats.remote_read_bytes) += remote * kPageSize;
}

void UvmDriverBackend::DeliverCompletions(DriverRecordReader& reader) {
  calls_.DeliverCompletions(*listener_, *engine_, faults_, reader);
}

}  // namespace umlab::cuda
