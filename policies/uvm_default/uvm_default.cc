#include "policies/uvm_default/uvm_default.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>

#include "absl/strings/str_format.h"

namespace umlab {
namespace {

// A block's page mask as 64-page words, so that subtree counts are popcounts.
constexpr int kWords = kPagesPerBlock / 64;
using Words = std::array<uint64_t, kWords>;

Words ToWords(const PageMask& mask) {
  Words words{};
  const PageMask low(~0ull);
  for (int i = 0; i < kWords; ++i) words[i] = ((mask >> (64 * i)) & low).to_ullong();
  return words;
}

PageMask FromWords(const Words& words) {
  PageMask mask;
  for (int i = kWords - 1; i >= 0; --i) {
    mask <<= 64;
    mask |= PageMask(words[i]);
  }
  return mask;
}

uint64_t LowBits(int count) { return count >= 64 ? ~0ull : (1ull << count) - 1; }

// Pages set in [first, first + size) where the range is aligned to its size.
int CountAligned(const Words& words, int first, int size) {
  if (size < 64) return std::popcount((words[first / 64] >> (first % 64)) & LowBits(size));
  int count = 0;
  for (int w = first / 64; w < (first + size) / 64; ++w) count += std::popcount(words[w]);
  return count;
}

void FillAligned(Words& words, int first, int size) {
  if (size < 64) {
    words[first / 64] |= LowBits(size) << (first % 64);
    return;
  }
  for (int w = first / 64; w < (first + size) / 64; ++w) words[w] = ~0ull;
}

}  // namespace

PageMask TreePrefetch(const PageMask& faulted, const PageMask& present,
                      const PageMask& thrashing, int threshold_percent, int big_page_pages) {
  const Words thrash = ToWords(thrashing);
  const Words fault = ToWords(faulted);
  Words tree = ToWords(present | faulted);

  // Faults grow to whole big pages unless a page of that big page thrashes
  // (grow_fault_granularity): the tree then sees the big page as faulted.
  for (int first = 0; first < kPagesPerBlock; first += big_page_pages) {
    if (CountAligned(fault, first, big_page_pages) > 0 &&
        CountAligned(thrash, first, big_page_pages) == 0) {
      FillAligned(tree, first, big_page_pages);
    }
  }

  // Thrashing pages do not seed prefetching.
  Words seeds{};
  for (int w = 0; w < kWords; ++w) seeds[w] = fault[w] & ~thrash[w];

  // Every subtree on the path from a seed to the root that is more than
  // threshold% full is prefetched. The driver keeps the largest one per seed;
  // subtrees on one path are nested, so their union is that largest one.
  Words prefetch{};
  for (int size = 1; size <= kPagesPerBlock; size <<= 1) {
    for (int first = 0; first < kPagesPerBlock; first += size) {
      if (size < 64 && seeds[first / 64] == 0) {
        first += 64 - size;  // no seed in this word: skip to the next one
        continue;
      }
      if (CountAligned(seeds, first, size) == 0) continue;
      if (CountAligned(tree, first, size) * 100 > size * threshold_percent) {
        FillAligned(prefetch, first, size);
      }
    }
  }
  for (int w = 0; w < kWords; ++w) prefetch[w] &= ~thrash[w];
  return FromWords(prefetch) | faulted;
}

UvmDefaultPolicy::UvmDefaultPolicy(const UvmDefaultOptions& options) : options_(options) {}

PageMask UvmDefaultPolicy::ThrashingPages(BlockNumber block) const {
  auto it = history_.find(block);
  if (it == history_.end() || it->second.pages == nullptr) return PageMask();
  return it->second.pages->thrashing;
}

PageMask UvmDefaultPolicy::ExpandFault(BlockNumber block, const PageMask& faulted) {
  if (!options_.prefetch) return faulted;
  BlockHistory& history = history_[block];
  history.faulted_pages += static_cast<uint32_t>(faulted.count());
  // uvm_perf_prefetch_min_faults: too few faults on the block to trust.
  if (history.faulted_pages < static_cast<uint32_t>(options_.min_faults)) return faulted;
  const BlockState* state = context().memory().Find(block);
  // Pages already on their way count as resident: they will be.
  const PageMask present = state == nullptr ? PageMask() : state->resident | state->in_flight;
  const PageMask thrashing =
      history.pages == nullptr ? PageMask() : history.pages->thrashing;
  const PageMask expanded = TreePrefetch(faulted, present, thrashing,
                                         options_.threshold_percent, options_.big_page_pages);
  // The pages this adds that the engine will migrate: not faulted, not
  // already resident or on their way.
  tree_prefetch_pages_ += (expanded & ~faulted & ~present).count();
  return expanded;
}

void UvmDefaultPolicy::ReportStats(PolicyStats& out) const {
  out.AddCount("tree_prefetch_pages", tree_prefetch_pages_);
  out.AddCount("thrashing_detections", thrashing_detections_);
  out.AddCount("pins", pins_);
}

void UvmDefaultPolicy::OnFaultBatch(const FaultBatch& /*batch*/) { ExpirePins(); }

void UvmDefaultPolicy::OnKernelBegin(uint32_t /*exec_id*/) { ExpirePins(); }

void UvmDefaultPolicy::OnMigrated(BlockNumber block, const PageMask& pages,
                                  TransferKind /*kind*/) {
  // The driver counts migrations caused by faults and prefetches, never
  // evictions (thrashing_event_cb skips UVM_MAKE_RESIDENT_CAUSE_EVICTION);
  // the engine calls OnMigrated only for those two.
  if (!options_.thrashing) return;
  ExpirePins();
  const Nanos now = context().now();
  BlockHistory& history = history_[block];
  if (history.pages == nullptr) {
    const bool close =
        history.last_event_ns >= 0 && now - history.last_event_ns <= options_.lapse_ns;
    history.last_event_ns = now;
    if (!close) return;
    history.pages = std::make_unique<PageHistory>();
    history.pages->last_event_ns.fill(-1);
  }
  history.last_event_ns = now;
  PageHistory& page_history = *history.pages;
  bool thrashing = false;
  for (size_t page = pages._Find_first(); page < pages.size(); page = pages._Find_next(page)) {
    const Nanos last = page_history.last_event_ns[page];
    page_history.last_event_ns[page] = now;
    if (last < 0) continue;
    uint8_t& events = page_history.events[page];
    if (now - last <= options_.lapse_ns) {
      if (events < UINT8_MAX) ++events;
      if (events >= options_.thrashing_threshold) {
        page_history.thrashing.set(page);
        thrashing = true;
      }
    } else {
      // The events must be consecutive: a quiet lapse starts the count over.
      events = 0;
      page_history.thrashing.reset(page);
    }
  }
  if (thrashing) NoteThrashing(block);
}

void UvmDefaultPolicy::OnBlockFreed(BlockNumber block) {
  // The driver frees a block's thrashing state with the block; a block that
  // comes back at the same address is new data and starts with a clean slate.
  history_.erase(block);
  for (auto pin = pinned_.begin(); pin != pinned_.end();) {
    if (pin->block == block) {
      context().SetPinned(block, false);
      pin = pinned_.erase(pin);
    } else {
      ++pin;
    }
  }
}

void UvmDefaultPolicy::NoteThrashing(BlockNumber block) {
  ++thrashing_detections_;
  const MemoryView& memory = context().memory();
  const BlockState* state = memory.Find(block);
  if (state == nullptr || state->pinned || !state->has_frame) return;
  const auto limit = static_cast<size_t>(
      std::floor(static_cast<double>(memory.capacity_frames()) * options_.max_pinned_fraction));
  if (pinned_.size() >= limit) return;
  context().SetPinned(block, true);
  pinned_.push_back(Pin{block, context().now() + options_.pin_ns});
  ++pins_;
}

void UvmDefaultPolicy::ExpirePins() {
  const Nanos now = context().now();
  while (!pinned_.empty() && pinned_.front().until_ns <= now) {
    context().SetPinned(pinned_.front().block, false);
    pinned_.pop_front();
  }
}

namespace {

absl::StatusOr<std::unique_ptr<Policy>> MakeUvmDefault(const ParamMap& params) {
  UvmDefaultOptions options;
  options.prefetch = params.Bool("prefetch");
  options.threshold_percent = static_cast<int>(params.Int("threshold"));
  options.min_faults = static_cast<int>(params.Int("min_faults"));
  const int64_t big_page_kb = params.Int("big_page_kb");
  options.thrashing = params.Bool("thrashing");
  options.thrashing_threshold = static_cast<int>(params.Int("thrashing_threshold"));
  const int64_t lapse_us = params.Int("lapse_us");
  const int64_t pin_lapses = params.Int("pin_lapses");
  options.max_pinned_fraction = params.Double("max_pinned_fraction");
  // Ranges are declared with the parameters below; a power of two is not a
  // range, so big_page_kb's shape is checked here.
  if ((big_page_kb & (big_page_kb - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "policy uvm-default: big_page_kb=%d must be a power of two", big_page_kb));
  }
  options.big_page_pages = static_cast<int>(big_page_kb / static_cast<int64_t>(kPageSize / 1024));
  options.lapse_ns = lapse_us * 1000;
  options.pin_ns = pin_lapses * options.lapse_ns;
  return std::make_unique<UvmDefaultPolicy>(options);
}

}  // namespace

UMLAB_REGISTER_POLICY(
    uvm_default,
    {"uvm-default",
     "the UVM driver: tree prefetcher (64 KB big pages, >51% subtrees), least recently "
     "migrated eviction, thrashing detection with pinning",
     {
         {"prefetch", ParamType::kBool, "true", "the tree prefetcher (uvm_perf_prefetch_enable)"},
         {"threshold", ParamType::kInt, "51",
          "percent of a subtree resident or faulted before the rest is prefetched",
          ParamRange::Closed(1, 100)},
         {"min_faults", ParamType::kInt, "1", "faulted pages on a block before it prefetches",
          ParamRange::Closed(1, 20)},  // the driver's bounds
         {"big_page_kb", ParamType::kInt, "64", "big-page size faults grow to, in KiB (a power of two)",
          ParamRange::Closed(kPageSize / 1024, kBlockSize / 1024)},
         {"thrashing", ParamType::kBool, "true", "thrashing detection and pinning"},
         {"thrashing_threshold", ParamType::kInt, "3",
          "consecutive migrations of a page within a lapse that mean thrashing",
          ParamRange::Closed(1, 255)},
         {"lapse_us", ParamType::kInt, "500", "the thrashing lapse, in microseconds",
          ParamRange::AtLeast(1)},
         {"pin_lapses", ParamType::kInt, "300",
          "how long a thrashing block stays pinned, in lapses (150 ms by default)",
          ParamRange::AtLeast(1)},
         {"max_pinned_fraction", ParamType::kDouble, "0.25",
          "most device frames pinned at once (ours: keeps the fault path supplied); below 1, "
          "since pinning every frame would leave faults no victim",
          ParamRange::ClosedOpen(0, 1)},
     },
     MakeUvmDefault});

}  // namespace umlab
