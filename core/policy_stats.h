// A policy's own counters at the end of a run, in the spirit of ChampSim's
// `*_final_stats`: how often it made each of its decisions (kernels
// predicted, blocks pinned, ...), which the engine's RunStats cannot see.
// The report prints them per run: in the table, and as the JSON contract's
// `policy_stats` object, in the order the policy added them.
#ifndef UMLAB_CORE_POLICY_STATS_H_
#define UMLAB_CORE_POLICY_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace umlab {

class PolicyStats {
 public:
  // Whole counts stay integers in the JSON; a real (a ratio, a mean) is a double.
  using Value = std::variant<uint64_t, double>;
  struct Counter {
    std::string name;  // snake_case: a JSON key
    Value value;
  };

  // Two names rather than one overloaded Add: `Add("x", 3)` would be
  // ambiguous between the integer and the double.
  void AddCount(std::string name, uint64_t value) { Set(std::move(name), value); }
  void AddReal(std::string name, double value) { Set(std::move(name), value); }

  const std::vector<Counter>& counters() const { return counters_; }
  bool empty() const { return counters_.empty(); }
  // The whole count named `name`, if one was added.
  std::optional<uint64_t> CountOf(std::string_view name) const {
    for (const Counter& counter : counters_) {
      if (counter.name == name && std::holds_alternative<uint64_t>(counter.value)) {
        return std::get<uint64_t>(counter.value);
      }
    }
    return std::nullopt;
  }

 private:
  // A name added twice keeps its first position and takes the later value,
  // so JSON keys stay unique and the order stays stable.
  void Set(std::string name, Value value) {
    for (Counter& counter : counters_) {
      if (counter.name == name) {
        counter.value = value;
        return;
      }
    }
    counters_.push_back(Counter{std::move(name), value});
  }

  std::vector<Counter> counters_;
};

}  // namespace umlab

#endif  // UMLAB_CORE_POLICY_STATS_H_
