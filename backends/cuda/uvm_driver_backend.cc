#include "backends/cuda/uvm_driver_backend.h"

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

PageUse UvmDriverBackend::QueryUse(BlockNumber block) const {
  const BlockState* state = engine_ == nullptr ? nullptr : engine_->memory_state().Find(block);
  const PageMask resident = state == nullptr ? PageMask() : state->resident;
  return PageUse{resident, resident};
}

void UvmDriverBackend::DeliverCompletions(DriverRecordReader& reader) {
  calls_.DeliverCompletions(*listener_, *engine_, faults_, reader);
}

}  // namespace umlab::cuda
