// A policy for tests that makes the engine requests a test scripts, per
// kernel, and otherwise decides as demand does.
#ifndef UMLAB_TESTS_SCRIPTED_MOVES_H_
#define UMLAB_TESTS_SCRIPTED_MOVES_H_

#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/policy.h"

namespace umlab::testing {

class ScriptedMoves final : public Policy {
 public:
  using Move = std::function<void(PolicyContext&)>;
  // Runs `move` when kernel `exec_id` begins.
  void At(uint32_t exec_id, Move move) { moves_[exec_id].push_back(std::move(move)); }
  void OnKernelBegin(uint32_t exec_id) override {
    for (const Move& move : moves_[exec_id]) move(context());
  }
  // Gives no frame to a prefetch: the engine drops it.
  bool refuse_prefetch_victims = false;
  std::optional<BlockNumber> ChooseVictim(const VictimQuery& query) override {
    if (refuse_prefetch_victims && query.reason == VictimReason::kPrefetch) return std::nullopt;
    return Policy::ChooseVictim(query);
  }
  // Answers every fault with a remote mapping.
  bool map_faults_remotely = false;
  bool MapsRemotely() const override { return true; }
  PageMask MapRemotelyOnFault(BlockNumber, const PageMask& faulted) override {
    return map_faults_remotely ? faulted : PageMask();
  }

 private:
  std::map<uint32_t, std::vector<Move>> moves_;
};

}  // namespace umlab::testing

#endif  // UMLAB_TESTS_SCRIPTED_MOVES_H_
