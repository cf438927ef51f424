#include "policies/g10/link_budget.h"

namespace umlab {

LinkBudget::LinkBudget(const TensorVitality& vitality, const LaneRates& rates)
    : kernels_(vitality.kernels()) {
  const std::array<double, 4> per_us = {rates.storage_to_device, rates.host_to_device,
                                        rates.device_to_storage, rates.device_to_host};
  for (size_t lane = 0; lane < lanes_.size(); ++lane) {
    lanes_[lane].resize(static_cast<size_t>(kernels_));
    for (int k = 0; k < kernels_; ++k) {
      lanes_[lane][static_cast<size_t>(k)].capacity = per_us[lane] * vitality.DurationUs(k);
    }
  }
}

int LinkBudget::FinishKernel(Lane lane, double bytes, int from) const {
  int k = from;
  double rest = bytes;
  while (k < kernels_) {
    if (!At(lane, k).full) rest -= At(lane, k).room();
    if (rest <= 0 || k == kernels_ - 1) break;
    ++k;
  }
  return k;
}

int LinkBudget::StartKernel(Lane lane, double bytes, int needed) const {
  int k = needed - 1;
  double rest = bytes;
  while (k >= 0) {
    if (!At(lane, k).full) rest -= At(lane, k).room();
    if (rest <= 0 || k == 0) break;
    --k;
  }
  return k;
}

bool LinkBudget::AnyRoom(Lane lane, int from, int until) const {
  for (int k = from; k < until && k < kernels_; ++k) {
    if (!At(lane, k).full) return true;
  }
  return false;
}

void LinkBudget::Book(Lane lane, double bytes, int from) {
  double rest = bytes;
  for (int k = from; k < kernels_ && rest > 0; ++k) {
    Slot& slot = At(lane, k);
    if (slot.full) continue;
    const double moved = rest > slot.room() ? slot.room() : rest;
    rest -= moved;
    if (IsStorage(lane)) {
      // Storage bytes cross the link as well.
      Slot& link = At(LinkOf(lane), k);
      link.booked += moved;
      if (link.booked >= link.capacity) link.full = true;
      slot.booked += moved;
      if (rest > 0) {
        slot.booked = slot.capacity;
        slot.full = true;
      }
    } else {
      Slot& storage = At(StorageOf(lane), k);
      slot.booked += moved;
      if (rest > 0) {
        slot.full = true;
        storage.booked = storage.capacity;
        storage.full = true;
      } else if (slot.booked >= slot.capacity - storage.capacity) {
        // What the link carries past its share beside the drive is the
        // drive's share taken (the artifact adds the whole excess each time).
        storage.booked += slot.booked - (slot.capacity - storage.capacity);
        if (storage.booked >= storage.capacity) {
          storage.booked = storage.capacity;
          storage.full = true;
        }
      }
    }
  }
}

}  // namespace umlab
