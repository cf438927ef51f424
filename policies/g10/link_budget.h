// The G10 planner's estimate of the link, kernel by kernel (the artifact's
// kernel_BW_buffer and its *_BWgiveIndx, *_BWsim and gpu2ssd_BWcheck in
// src/analysis.cc). For each kernel and each of four lanes it keeps the bytes
// the lane can move during the kernel's ideal time and the bytes planned on
// it so far. Storage traffic crosses the PCIe link too: booking a storage
// lane books the link's lane of the same direction, and booking the link
// past (its capacity - the storage lane's) spills into the storage lane.
#ifndef UMLAB_POLICIES_G10_LINK_BUDGET_H_
#define UMLAB_POLICIES_G10_LINK_BUDGET_H_

#include <array>
#include <vector>

#include "policies/g10/tensor_vitality.h"

namespace umlab {

enum class Lane { kStorageToDevice = 0, kHostToDevice, kDeviceToStorage, kDeviceToHost };

struct LaneRates {  // bytes per microsecond
  double host_to_device = 0;
  double device_to_host = 0;
  double storage_to_device = 0;  // 0: no storage
  double device_to_storage = 0;
};

class LinkBudget {
 public:
  LinkBudget(const TensorVitality& vitality, const LaneRates& rates);

  // An eviction of `bytes` on an outbound lane, starting at kernel `from`:
  // the kernel in which it would finish, the last kernel if it never does.
  int FinishKernel(Lane lane, double bytes, int from) const;
  // A prefetch of `bytes` on an inbound lane that must land before kernel
  // `needed`: the kernel in which it has to start (walking back), 0 if
  // there is not time enough; -1 if `needed` is 0.
  int StartKernel(Lane lane, double bytes, int needed) const;
  // Whether some kernel of [from, until) has room left on `lane`.
  bool AnyRoom(Lane lane, int from, int until) const;
  // Books `bytes` on `lane` from kernel `from` onward.
  void Book(Lane lane, double bytes, int from);

 private:
  struct Slot {
    double capacity = 0;
    double booked = 0;
    bool full = false;
    double room() const { return capacity - booked; }
  };
  // The link lane a storage lane travels on, the same direction.
  static Lane LinkOf(Lane storage_lane) {
    return storage_lane == Lane::kStorageToDevice ? Lane::kHostToDevice : Lane::kDeviceToHost;
  }
  static Lane StorageOf(Lane link_lane) {
    return link_lane == Lane::kHostToDevice ? Lane::kStorageToDevice : Lane::kDeviceToStorage;
  }
  static bool IsStorage(Lane lane) {
    return lane == Lane::kStorageToDevice || lane == Lane::kDeviceToStorage;
  }
  Slot& At(Lane lane, int kernel) {
    return lanes_[static_cast<size_t>(lane)][static_cast<size_t>(kernel)];
  }
  const Slot& At(Lane lane, int kernel) const {
    return lanes_[static_cast<size_t>(lane)][static_cast<size_t>(kernel)];
  }

  int kernels_;
  std::array<std::vector<Slot>, 4> lanes_;
};

}  // namespace umlab

#endif  // UMLAB_POLICIES_G10_LINK_BUDGET_H_
