#include "backends/cuda/transfer_ledger.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "core/block_range.h"
#include "core/page_mask.h"

namespace umlab::cuda {

void TransferLedger::Note(uint64_t start_ns, uint64_t program_address, uint64_t bytes,
                          bool to_device) {
  if (bytes > 0) transfers_.push_back({start_ns, program_address, bytes, to_device});
}

uint64_t TransferLedger::UnrecordedDepartureBytes() const {
  std::vector<Transfer> in_order = transfers_;
  std::stable_sort(in_order.begin(), in_order.end(),
                   [](const Transfer& a, const Transfer& b) { return a.start_ns < b.start_ns; });
  // Pages the records last showed arriving. Pages with no record yet, or
  // populated on the GPU (a populate copies nothing and has no transfer
  // record), count as away: they cannot be caught arriving twice.
  absl::flat_hash_map<BlockNumber, PageMask> on_device;
  uint64_t unrecorded = 0;
  for (const Transfer& transfer : in_order) {
    ForEachBlockRange(transfer.address, transfer.bytes, /*whole_pages_only=*/false,
                      [&](BlockNumber block, const PageMask& pages) {
                        PageMask& there = on_device[block];
                        if (transfer.to_device) {
                          unrecorded += MaskBytes(there & pages);
                          there |= pages;
                        } else {
                          there &= ~pages;
                        }
                      });
  }
  return unrecorded;
}

}  // namespace umlab::cuda
