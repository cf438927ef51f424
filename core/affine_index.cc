#include "core/affine_index.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace umlab {
namespace {

// Beyond this many ranges a union is rounded out to pages (see the header).
constexpr size_t kMaxRanges = size_t{1} << 20;

// One variable of the index over its range: coefficient times 0 .. count-1.
struct Step {
  int64_t coefficient = 0;
  uint64_t count = 0;
};

void SortAndMerge(std::vector<ElementRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const ElementRange& a, const ElementRange& b) { return a.begin < b.begin; });
  size_t kept = 0;
  for (const ElementRange& range : ranges) {
    if (kept > 0 && range.begin <= ranges[kept - 1].end) {
      ranges[kept - 1].end = std::max(ranges[kept - 1].end, range.end);
    } else {
      ranges[kept++] = range;
    }
  }
  ranges.resize(kept);
}

// Rounds every range out to whole pages and merges: only pages matter to
// whoever uses the union, and this bounds the ranges by the pages spanned.
void RoundOutToPages(std::vector<ElementRange>& ranges, int64_t elements_per_page) {
  const int64_t page = std::max<int64_t>(1, elements_per_page);
  auto floor_to = [page](int64_t value) {
    const int64_t quotient = value / page;
    return (value % page != 0 && value < 0 ? quotient - 1 : quotient) * page;
  };
  for (ElementRange& range : ranges) {
    range.begin = floor_to(range.begin);
    range.end = floor_to(range.end + page - 1);
  }
  SortAndMerge(ranges);
}

// The Minkowski sum of `ranges` with every step's values: the union over
// all the variables' values of the ranges shifted by the index. The sum
// does not depend on the order the steps are added in, so they go from the
// smallest coefficient up: a range as wide as the next coefficient then
// grows into one range instead of splitting into many (a row's threads,
// then the row's blocks, then the rows).
std::vector<ElementRange> Image(std::vector<ElementRange> ranges, std::vector<Step> steps,
                                int64_t elements_per_page) {
  for (const Step& step : steps) {
    if (step.count == 0) return {};
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return std::llabs(a.coefficient) < std::llabs(b.coefficient);
  });
  for (Step step : steps) {
    if (step.count <= 1 || step.coefficient == 0 || ranges.empty()) continue;
    const int64_t last = static_cast<int64_t>(step.count - 1);
    if (step.coefficient < 0) {
      // a x over 0..n-1 is |a| (n-1-x) + a (n-1): a shift, then a positive step.
      for (ElementRange& range : ranges) {
        range.begin += step.coefficient * last;
        range.end += step.coefficient * last;
      }
      step.coefficient = -step.coefficient;
    }
    const int64_t span = ranges.back().end - ranges.front().begin;
    if (ranges.size() == 1 && step.coefficient <= span) {
      ranges.front().end += step.coefficient * last;
      continue;
    }
    if (step.count * ranges.size() > kMaxRanges) {
      RoundOutToPages(ranges, elements_per_page);
      if (ranges.size() == 1 && step.coefficient <= ranges.front().end - ranges.front().begin) {
        ranges.front().end += step.coefficient * last;
        continue;
      }
    }
    std::vector<ElementRange> shifted;
    shifted.reserve(ranges.size() * step.count);
    for (uint64_t value = 0; value < step.count; ++value) {
      const int64_t shift = step.coefficient * static_cast<int64_t>(value);
      for (const ElementRange& range : ranges) {
        shifted.push_back({range.begin + shift, range.end + shift});
      }
    }
    SortAndMerge(shifted);
    if (shifted.size() > kMaxRanges) RoundOutToPages(shifted, elements_per_page);
    ranges = std::move(shifted);
  }
  return ranges;
}

bool IsBlockVariable(IndexVariable variable) {
  return variable == IndexVariable::kBlockX || variable == IndexVariable::kBlockY ||
         variable == IndexVariable::kBlockZ;
}

// The range of a thread or loop variable; block variables are the box's.
uint64_t CountOf(const AffineTerm& term, const Dim3& threads) {
  switch (term.variable) {
    case IndexVariable::kThreadX:
      return threads.x;
    case IndexVariable::kThreadY:
      return threads.y;
    case IndexVariable::kThreadZ:
      return threads.z;
    case IndexVariable::kLoop:
      return term.trips;
    default:
      return 1;
  }
}

// The block terms over the box: the box's first block folds into the
// constant, so each variable runs from 0 over the box's extent.
std::vector<Step> BlockSteps(const AffineIndex& index, const GridShare& blocks, int64_t& constant) {
  std::vector<Step> steps;
  for (const AffineTerm& term : index.terms) {
    uint32_t first = 0;
    uint32_t extent = 0;
    switch (term.variable) {
      case IndexVariable::kBlockX:
        first = blocks.first.x;
        extent = blocks.extent.x;
        break;
      case IndexVariable::kBlockY:
        first = blocks.first.y;
        extent = blocks.extent.y;
        break;
      case IndexVariable::kBlockZ:
        first = blocks.first.z;
        extent = blocks.extent.z;
        break;
      default:
        continue;
    }
    constant += term.coefficient * static_cast<int64_t>(first);
    steps.push_back({term.coefficient, extent});
  }
  return steps;
}

}  // namespace

std::vector<ElementRange> TouchedElements(const AffineIndex& index, const GridShare& blocks,
                                          const Dim3& threads, int64_t elements_per_page) {
  if (blocks.empty()) return {};
  int64_t constant = index.constant;
  std::vector<Step> steps = BlockSteps(index, blocks, constant);
  for (const AffineTerm& term : index.terms) {
    if (!IsBlockVariable(term.variable))
      steps.push_back({term.coefficient, CountOf(term, threads)});
  }
  return Image({{constant, constant + 1}}, std::move(steps), elements_per_page);
}

std::vector<ElementRange> RepresentativeElements(const AffineIndex& index, const GridShare& blocks,
                                                 const Dim3& threads, int64_t elements_per_page) {
  if (blocks.empty()) return {};
  int64_t constant = index.constant;
  std::vector<Step> steps = BlockSteps(index, blocks, constant);
  // One block's range at its representative threads: an affine function
  // takes its extremes at the corners of the box of thread indices and
  // loop bounds, each term at 0 or at its last value.
  int64_t lowest = constant;
  int64_t highest = constant;
  for (const AffineTerm& term : index.terms) {
    if (IsBlockVariable(term.variable)) continue;
    const uint64_t count = CountOf(term, threads);
    if (count == 0) return {};
    const int64_t at_last = term.coefficient * static_cast<int64_t>(count - 1);
    lowest += std::min<int64_t>(0, at_last);
    highest += std::max<int64_t>(0, at_last);
  }
  return Image({{lowest, highest + 1}}, std::move(steps), elements_per_page);
}

}  // namespace umlab
