#include "policies/g10/tensor_vitality.h"

#include <algorithm>
#include <iterator>

#include "core/memory_units.h"

namespace umlab {

TensorVitality::TensorVitality(const IterationGraph& iteration)
    : kernels_(static_cast<int>(iteration.kernels.size())) {
  tensors_.reserve(iteration.tensors.size());
  for (const GraphTensor& tensor : iteration.tensors) {
    TensorLife life;
    life.address = tensor.address;
    life.size = tensor.size;
    life.bytes = PagesSpanned(tensor.address, tensor.size) * kPageSize;
    life.global = tensor.global;
    tensors_.push_back(life);
  }

  std::vector<std::vector<int>> use_kernels(tensors_.size());
  std::vector<int> last_read(tensors_.size(), -1);
  uses_.resize(iteration.kernels.size());
  for (int k = 0; k < kernels_; ++k) {
    const GraphKernel& kernel = iteration.kernels[static_cast<size_t>(k)];
    std::vector<uint32_t>& uses = uses_[static_cast<size_t>(k)];
    std::set_union(kernel.reads.begin(), kernel.reads.end(), kernel.writes.begin(),
                   kernel.writes.end(), std::back_inserter(uses));
    for (uint32_t t : uses) use_kernels[t].push_back(k);
    for (uint32_t t : kernel.reads) last_read[t] = k;
    duration_us_.push_back(static_cast<double>(kernel.duration_ns) / 1000.0);
  }

  start_us_.assign(2 * static_cast<size_t>(kernels_) + 1, 0.0);
  for (int k = 0; k < 2 * kernels_; ++k) {
    start_us_[static_cast<size_t>(k) + 1] = start_us_[static_cast<size_t>(k)] + DurationUs(k);
  }

  auto add_period = [&](uint32_t tensor, int start, int end) {
    InactivePeriod period{tensor, start, end, start > end, 0};
    period.time_us = StartUs(period.looped ? end + kernels_ : end) - StartUs(start);
    periods_.push_back(period);
  };
  for (uint32_t t = 0; t < tensors_.size(); ++t) {
    const std::vector<int>& uses = use_kernels[t];
    if (uses.empty()) continue;
    TensorLife& life = tensors_[t];
    life.used = true;
    if (!life.global) {
      life.birth = uses.front();
      life.death = last_read[t] >= 0 ? last_read[t] + 1 : -1;
      if (life.death == -1) continue;  // never read: no period to hide
      for (size_t i = 1; i < uses.size() && uses[i] < life.death; ++i) {
        if (uses[i] > uses[i - 1] + 1) add_period(t, uses[i - 1] + 1, uses[i]);
      }
      continue;
    }
    for (size_t i = 1; i < uses.size(); ++i) {
      if (uses[i] > uses[i - 1] + 1) add_period(t, uses[i - 1] + 1, uses[i]);
    }
    // From the last use round to the first, in the next iteration.
    const int after_last = uses.back() + 1;
    if (after_last < kernels_) {
      add_period(t, after_last, uses.front());
    } else if (uses.front() > 0) {
      add_period(t, 0, uses.front());
    }
  }
}

bool TensorVitality::Uses(int kernel, uint32_t tensor) const {
  const std::vector<uint32_t>& uses = uses_[static_cast<size_t>(kernel % kernels_)];
  return std::binary_search(uses.begin(), uses.end(), tensor);
}

double TensorVitality::DurationUs(int k) const {
  return duration_us_[static_cast<size_t>(k % kernels_)];
}

int TensorVitality::KernelAt(double t_us, int from, int to) const {
  if (from >= to) return -1;
  // The last j with StartUs(j) <= t; it holds t if t < StartUs(j + 1).
  const auto first = start_us_.begin() + from;
  const auto last = start_us_.begin() + to;
  const auto after = std::upper_bound(first, last, t_us);
  if (after == first) return -1;
  const int j = static_cast<int>(std::distance(start_us_.begin(), after)) - 1;
  return t_us < StartUs(j + 1) ? j : -1;
}

}  // namespace umlab
