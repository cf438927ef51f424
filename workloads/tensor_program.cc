#include "workloads/tensor_program.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/byte_size.h"
#include "core/split_mix64.h"
#include "workloads/allocator/caching_allocator.h"
#include "workloads/kernel_emitter.h"

namespace umlab {

// ---------------------------------------------------------------------------
// The builder.
// ---------------------------------------------------------------------------

KernelAccess GemmWeightRead(int weight, uint64_t rows) {
  constexpr uint64_t kRowsPerTile = 256;
  const uint64_t passes = std::max<uint64_t>(1, (rows + kRowsPerTile - 1) / kRowsPerTile);
  KernelAccess read{weight, AccessType::kRead};
  read.rereads = static_cast<uint32_t>(std::min<uint64_t>(passes - 1, UINT32_MAX));
  return read;
}

int TensorProgramBuilder::Tensor(std::string name, uint64_t bytes, TensorRole role) {
  program_.tensors.push_back(TensorSpec{std::move(name), bytes, role});
  return static_cast<int>(program_.tensors.size()) - 1;
}

int TensorProgramBuilder::HostTensor(std::string name, uint64_t bytes) {
  const int tensor = Tensor(std::move(name), bytes, TensorRole::kData);
  program_.tensors[tensor].on_host = true;
  return tensor;
}

void TensorProgramBuilder::Copy(int device, int host, CopyDirection direction, bool async) {
  program_.copies.push_back(CopySpec{device, host, direction, async});
  steps_->push_back({ProgramStep::Kind::kCopy, static_cast<int>(program_.copies.size()) - 1});
}

int TensorProgramBuilder::Gather(const GatherSpec& gather) {
  program_.gathers.push_back(gather);
  return static_cast<int>(program_.gathers.size()) - 1;
}

double TensorProgramBuilder::AccessBytes(const std::vector<KernelAccess>& accesses) const {
  double bytes = 0;
  for (const KernelAccess& access : accesses) {
    if (access.gather >= 0) {
      const GatherSpec& g = program_.gathers[access.gather];
      bytes += static_cast<double>(g.draws) * static_cast<double>(g.item_bytes);
    } else {
      const uint64_t tensor_bytes = program_.tensors[access.tensor].bytes;
      bytes += static_cast<double>(access.size != 0 ? access.size
                                                    : tensor_bytes - access.offset);
    }
  }
  return bytes;
}

Nanos TensorProgramBuilder::RooflineNanos(double flops, double bytes,
                                          bool tensor_cores) const {
  return umlab::RooflineNanos(spec_, flops, bytes, tensor_cores);
}

void TensorProgramBuilder::Launch(const std::string& name, double flops, bool tensor_cores,
                                  std::vector<KernelAccess> accesses, double bytes) {
  auto [it, inserted] =
      kernel_index_.try_emplace(name, static_cast<int>(program_.kernels.size()));
  if (inserted) {
    const double moved = bytes >= 0 ? bytes : AccessBytes(accesses);
    program_.kernels.push_back(KernelSpec{name, RooflineNanos(flops, moved, tensor_cores),
                                          std::move(accesses), KernelPlace::kDevice});
  } else {
    CheckSameAccesses(it->second, accesses);
  }
  steps_->push_back({ProgramStep::Kind::kLaunch, it->second});
}

void TensorProgramBuilder::LaunchTimed(const std::string& name, Nanos duration_ns,
                                       std::vector<KernelAccess> accesses, KernelPlace place) {
  auto [it, inserted] =
      kernel_index_.try_emplace(name, static_cast<int>(program_.kernels.size()));
  if (inserted) {
    program_.kernels.push_back(KernelSpec{name, duration_ns, std::move(accesses), place});
  } else {
    CheckSameAccesses(it->second, accesses);
  }
  steps_->push_back({ProgramStep::Kind::kLaunch, it->second});
}

void TensorProgramBuilder::LaunchOnHost(const std::string& name, double bytes,
                                        std::vector<KernelAccess> accesses) {
  const double nanos = std::ceil(bytes / spec_.host_memory_bytes_per_second * 1e9);
  LaunchTimed(name, nanos < 1000.0 ? 1000 : static_cast<Nanos>(nanos), std::move(accesses),
              KernelPlace::kHost);
}

void TensorProgramBuilder::LaunchOnHostThread(const std::string& name, double bytes,
                                              std::vector<KernelAccess> accesses) {
  const double nanos = std::ceil(bytes / spec_.host_thread_bytes_per_second * 1e9);
  LaunchTimed(name, nanos < 1000.0 ? 1000 : static_cast<Nanos>(nanos), std::move(accesses),
              KernelPlace::kHost);
}

void TensorProgramBuilder::CheckSameAccesses(int kernel,
                                             const std::vector<KernelAccess>& accesses) {
  const std::vector<KernelAccess>& known = program_.kernels[kernel].accesses;
  bool same = known.size() == accesses.size();
  for (size_t i = 0; same && i < known.size(); ++i) {
    same = known[i].tensor == accesses[i].tensor && known[i].access == accesses[i].access &&
           known[i].offset == accesses[i].offset && known[i].size == accesses[i].size &&
           known[i].gather == accesses[i].gather;
  }
  if (!same && status_.ok()) {
    status_ = absl::InternalError(absl::StrCat(
        program_.workload, ": kernel ", program_.kernels[kernel].name,
        " is launched twice with different tensors; launch sites need distinct names"));
  }
}

// ---------------------------------------------------------------------------
// Gathers: deterministic irregular item sequences.
// ---------------------------------------------------------------------------

namespace {

// A uniform double in [0, 1) from 53 random bits.
double UnitInterval(uint64_t& state) {
  return static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
}

uint64_t Below(uint64_t& state, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(SplitMix64(state)) * n) >> 64);
}

// Rank r in [0, n) with P(r) roughly proportional to (r + 1)^-s: the inverse
// CDF of the continuous power law on [1, n + 1).
uint64_t PowerLawRank(uint64_t& state, uint64_t n, double s) {
  const double u = UnitInterval(state);
  const double top = static_cast<double>(n) + 1.0;
  double x;
  if (std::abs(s - 1.0) < 1e-9) {
    x = std::exp(u * std::log(top));
  } else {
    const double a = 1.0 - s;
    x = std::pow(1.0 + u * (std::pow(top, a) - 1.0), 1.0 / a);
  }
  const double rank = std::floor(x) - 1.0;
  if (!(rank >= 0)) return 0;
  return std::min(static_cast<uint64_t>(rank), n - 1);
}

// Hot ranks are scattered over the table, as ids of popular items are: a
// bijection rank -> (rank * multiplier + shift) mod n with the multiplier
// coprime to n.
class Scatter {
 public:
  Scatter(uint64_t n, uint64_t seed) : n_(n) {
    uint64_t state = seed ^ 0x5ca77e5ull;
    multiplier_ = n <= 1 ? 1 : (0x9e3779b97f4a7c15ull % n) | 1;
    while (n > 1 && std::gcd(multiplier_, n) != 1) multiplier_ = (multiplier_ + 2) % n;
    if (multiplier_ == 0) multiplier_ = 1;
    shift_ = n == 0 ? 0 : SplitMix64(state) % n;
  }
  uint64_t operator()(uint64_t rank) const {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(rank) * multiplier_ + shift_) % n_);
  }

 private:
  uint64_t n_, multiplier_ = 1, shift_ = 0;
};

// A full-period walk over [0, n): an LCG modulo the next power of two
// (Hull-Dobell: multiplier = 1 mod 4, odd increment), skipping values >= n.
// Each node's successor is fixed, like the next pointers of a linked
// structure laid out in a random permutation.
class Chase {
 public:
  Chase(uint64_t n, uint64_t start) : n_(n), current_(start % std::max<uint64_t>(n, 1)) {
    mask_ = 1;
    while (mask_ < n) mask_ <<= 1;
    mask_ -= 1;
  }
  uint64_t Next() {
    do {
      current_ = (current_ * 6364136223846793005ull + 1442695040888963407ull) & mask_;
    } while (current_ >= n_);
    return current_;
  }

 private:
  uint64_t n_, current_, mask_ = 0;
};

// The byte ranges (offset, size) of one gather's items for one iteration.
std::vector<std::pair<uint64_t, uint64_t>> DrawGather(const GatherSpec& g, int gather_id,
                                                      int iteration) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  if (g.items == 0 || g.draws == 0 || g.item_bytes == 0) return ranges;
  uint64_t state = g.seed * 0x100000001b3ull ^ (static_cast<uint64_t>(gather_id) << 32) ^
                   static_cast<uint64_t>(iteration + 1);
  SplitMix64(state);
  const Scatter scatter(g.items, g.seed + static_cast<uint64_t>(gather_id));
  Chase chase(g.items, SplitMix64(state));
  absl::flat_hash_set<uint64_t> seen;
  seen.reserve(std::min<uint64_t>(g.draws, g.items));
  uint64_t previous = ~0ull;
  for (uint64_t i = 0; i < g.draws; ++i) {
    uint64_t item = 0;
    switch (g.kind) {
      case GatherKind::kPowerLaw:
        item = scatter(PowerLawRank(state, g.items, g.exponent));
        break;
      case GatherKind::kUniform:
        item = Below(state, g.items);
        break;
      case GatherKind::kChase:
        item = chase.Next();
        break;
    }
    if (!seen.insert(item).second) continue;
    if (!ranges.empty() && item == previous + 1) {
      ranges.back().second += g.item_bytes;
    } else {
      ranges.push_back({item * g.item_bytes, g.item_bytes});
    }
    previous = item;
  }
  return ranges;
}

// ---------------------------------------------------------------------------
// The stream: interprets the program step by step.
// ---------------------------------------------------------------------------

class TensorProgramSource final : public EventSource {
 public:
  explicit TensorProgramSource(std::shared_ptr<const TensorProgram> program)
      : program_(std::move(program)),
        allocator_(CachingAllocatorOptions{},
                   [this](const Event& event) { pending_.push_back(event); }),
        addresses_(program_->tensors.size(), 0),
        defined_(program_->kernels.size(), false) {}

  // The allocator's sink points at this object.
  TensorProgramSource(const TensorProgramSource&) = delete;
  TensorProgramSource& operator=(const TensorProgramSource&) = delete;

  bool Next(Event& event) override {
    while (pending_.empty()) {
      if (done_) return false;
      RunStep();
    }
    event = std::move(pending_.front());
    pending_.pop_front();
    return true;
  }

  absl::Status status() const override { return status_; }

  const CachingAllocatorStats& allocator_stats() const { return allocator_.stats(); }
  uint64_t peak_live_bytes(TensorRole role) const {
    return peak_live_[static_cast<int>(role)];
  }

 private:
  const std::vector<ProgramStep>& Steps() const {
    return iteration_ < 0 ? program_->setup : program_->iteration;
  }

  void RunStep() {
    while (step_ == Steps().size()) {
      if (iteration_ + 1 >= program_->iterations) {
        done_ = true;
        return;
      }
      ++iteration_;
      step_ = 0;
    }
    const ProgramStep& step = Steps()[step_++];
    switch (step.kind) {
      case ProgramStep::Kind::kIterationBegin: {
        Event event;
        event.kind = EventKind::kIterationBegin;
        event.iteration = static_cast<uint64_t>(iteration_);
        pending_.push_back(std::move(event));
        break;
      }
      case ProgramStep::Kind::kAllocate: {
        const TensorSpec& tensor = program_->tensors[step.index];
        if (addresses_[step.index] != 0) {
          return Fail(tensor, absl::InternalError("allocated twice without a release"));
        }
        if (tensor.on_host) {
          // malloc's memory: a fresh page-aligned range, never handed out
          // twice, so a copy's source is never mistaken for another's.
          addresses_[step.index] = next_host_address_;
          next_host_address_ += (tensor.bytes + kPageSize - 1) / kPageSize * kPageSize;
          break;
        }
        absl::StatusOr<AllocatedBlock> block = allocator_.Allocate(tensor.bytes, tensor.role);
        if (!block.ok()) return Fail(tensor, block.status());
        addresses_[step.index] = block->address;
        uint64_t& live = live_[static_cast<int>(tensor.role)];
        uint64_t& peak = peak_live_[static_cast<int>(tensor.role)];
        live += tensor.bytes;
        peak = std::max(peak, live);
        break;
      }
      case ProgramStep::Kind::kRelease: {
        const TensorSpec& tensor = program_->tensors[step.index];
        if (tensor.on_host) {
          addresses_[step.index] = 0;
          break;
        }
        if (absl::Status freed = allocator_.Free(addresses_[step.index]); !freed.ok()) {
          return Fail(tensor, freed);
        }
        addresses_[step.index] = 0;
        live_[static_cast<int>(tensor.role)] -= tensor.bytes;
        break;
      }
      case ProgramStep::Kind::kLaunch:
        Launch(step.index);
        break;
      case ProgramStep::Kind::kCopy:
        EmitCopy(program_->copies[step.index]);
        break;
      case ProgramStep::Kind::kSync: {
        Event event;
        event.kind = EventKind::kSync;
        pending_.push_back(std::move(event));
        break;
      }
    }
  }

  void EmitCopy(const CopySpec& copy) {
    const TensorSpec& device = program_->tensors[copy.device];
    const TensorSpec& host = program_->tensors[copy.host];
    if (addresses_[copy.device] == 0 || addresses_[copy.host] == 0) {
      return Fail(addresses_[copy.device] == 0 ? device : host,
                  absl::InternalError("copied while it is free"));
    }
    if (device.on_host || !host.on_host || host.bytes < device.bytes) {
      return Fail(device, absl::InternalError(absl::StrCat(
                              "a copy needs a device tensor and a host one at least as large, "
                              "got ", host.name)));
    }
    pending_.push_back(CopyCommand{copy.direction, copy.async, addresses_[copy.device],
                                   addresses_[copy.host], device.bytes}
                           .ToEvent());
  }

  void Launch(int kernel_index) {
    const KernelSpec& kernel = program_->kernels[kernel_index];
    // Execution ids start at 1: the kernel's index in the program, plus one.
    KernelEmitter emitter(pending_, static_cast<uint32_t>(kernel_index) + 1, kernel.duration_ns,
                          defined_[kernel_index] ? nullptr : &kernel.name, kernel.place);
    defined_[kernel_index] = true;
    for (const KernelAccess& access : kernel.accesses) {
      const TensorSpec& tensor = program_->tensors[access.tensor];
      const uint64_t base = addresses_[access.tensor];
      if (base == 0) {
        return Fail(tensor, absl::InternalError(absl::StrCat(
                                "kernel ", kernel.name, " touches it while it is free")));
      }
      if (access.gather >= 0) {
        for (const auto& [offset, size] : Draws(access.gather)) {
          emitter.Access(access.access, base + offset, std::min(size, tensor.bytes - offset),
                         access.rereads);
        }
        continue;
      }
      emitter.Access(access.access, base + access.offset,
                     access.size != 0 ? access.size : tensor.bytes - access.offset,
                     access.rereads);
    }
    emitter.End();
  }

  // One gather is read by several kernels of an iteration (an embedding's
  // forward, its sparse update): its items are drawn once per iteration.
  const std::vector<std::pair<uint64_t, uint64_t>>& Draws(int gather) {
    auto& [iteration, ranges] = draws_[gather];
    if (ranges.empty() || iteration != iteration_) {
      ranges = DrawGather(program_->gathers[gather], gather, iteration_);
      iteration = iteration_;
    }
    return ranges;
  }

  void Fail(const TensorSpec& tensor, const absl::Status& cause) {
    const std::string where =
        iteration_ < 0 ? std::string("setup") : absl::StrCat("iteration ", iteration_);
    status_ = absl::Status(cause.code(),
                           absl::StrFormat("%s: %s, tensor %s (%s): %s", program_->workload,
                                           where, tensor.name, FormatBytes(tensor.bytes),
                                           cause.message()));
    pending_.clear();
    done_ = true;
  }

  std::shared_ptr<const TensorProgram> program_;
  std::deque<Event> pending_;
  CachingAllocator allocator_;
  std::vector<uint64_t> addresses_;  // per tensor; valid while allocated
  // Host buffers get addresses from here up, far below the allocator's
  // device range (CachingAllocatorOptions::device_base).
  uint64_t next_host_address_ = uint64_t{1} << 44;
  std::vector<bool> defined_;        // per kernel: kKernelDefine emitted
  int iteration_ = -1;               // -1 while in setup
  size_t step_ = 0;
  bool done_ = false;
  absl::Status status_;
  std::array<uint64_t, kTensorRoleCount> live_{};
  std::array<uint64_t, kTensorRoleCount> peak_live_{};
  absl::flat_hash_map<int, std::pair<int, std::vector<std::pair<uint64_t, uint64_t>>>> draws_;
};

}  // namespace

std::unique_ptr<EventSource> OpenTensorProgram(std::shared_ptr<const TensorProgram> program) {
  return std::make_unique<TensorProgramSource>(std::move(program));
}

absl::StatusOr<ProgramFootprint> MeasureFootprint(
    std::shared_ptr<const TensorProgram> program) {
  ProgramFootprint footprint;
  for (const TensorSpec& tensor : program->tensors) {
    if (tensor.on_host) {
      footprint.host_bytes += tensor.bytes;
      continue;
    }
    if (tensor.role == TensorRole::kParameter) footprint.parameter_bytes += tensor.bytes;
    if (tensor.role == TensorRole::kOptimizerState) {
      footprint.optimizer_state_bytes += tensor.bytes;
    }
    if (tensor.role == TensorRole::kData) footprint.data_bytes += tensor.bytes;
  }
  for (const ProgramStep& step : program->iteration) {
    if (step.kind != ProgramStep::Kind::kLaunch) continue;
    ++footprint.kernels_per_iteration;
    footprint.compute_ns_per_iteration += program->kernels[step.index].duration_ns;
  }
  footprint.distinct_kernels = static_cast<int>(program->kernels.size());

  TensorProgramSource source(program);
  Event event;
  while (source.Next(event)) ++footprint.events;
  if (!source.status().ok()) return source.status();
  footprint.peak_activation_bytes = source.peak_live_bytes(TensorRole::kActivation);
  footprint.peak_gradient_bytes = source.peak_live_bytes(TensorRole::kGradient);
  footprint.peak_workspace_bytes = source.peak_live_bytes(TensorRole::kWorkspace);
  footprint.peak_allocated_bytes = source.allocator_stats().peak_allocated_bytes;
  footprint.peak_reserved_bytes = source.allocator_stats().peak_reserved_bytes;
  return footprint;
}

std::string DescribeFootprint(const ProgramFootprint& f,
                              const std::string& optimizer_state_note) {
  std::string text;
  absl::StrAppendFormat(&text, "  parameters        %s\n", FormatBytes(f.parameter_bytes));
  absl::StrAppendFormat(&text, "  optimizer state   %s (%s)\n",
                        FormatBytes(f.optimizer_state_bytes), optimizer_state_note);
  absl::StrAppendFormat(&text, "  input data        %s\n", FormatBytes(f.data_bytes));
  absl::StrAppendFormat(&text, "  peak activations  %s\n",
                        FormatBytes(f.peak_activation_bytes));
  absl::StrAppendFormat(&text, "  peak gradients    %s\n", FormatBytes(f.peak_gradient_bytes));
  if (f.peak_workspace_bytes != 0) {
    absl::StrAppendFormat(&text, "  peak workspace    %s (masks, statistics, indices)\n",
                          FormatBytes(f.peak_workspace_bytes));
  }
  absl::StrAppendFormat(&text, "  peak allocated    %s (caching allocator, blocks)\n",
                        FormatBytes(f.peak_allocated_bytes));
  absl::StrAppendFormat(&text, "  peak reserved     %s (%.0f MB: the footprint)\n",
                        FormatBytes(f.peak_reserved_bytes),
                        static_cast<double>(f.peak_reserved_bytes) / 1e6);
  absl::StrAppendFormat(&text,
                        "  kernels           %d per iteration, %d execution ids in all\n",
                        f.kernels_per_iteration, f.distinct_kernels);
  absl::StrAppendFormat(&text, "  compute           %.3f ms per iteration (roofline)\n",
                        static_cast<double>(f.compute_ns_per_iteration) / 1e6);
  absl::StrAppendFormat(&text, "  events            %d in the stream\n", f.events);
  return text;
}

}  // namespace umlab
