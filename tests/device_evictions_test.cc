// The engine over a device that makes room by itself (the UVM driver under
// real oversubscription, Backend::MakesRoomFor): a fake backend whose fault
// stream and transfers the test drives by hand.
#include <vector>

#include <gtest/gtest.h>

#include "absl/container/flat_hash_set.h"

#include "core/backend.h"
#include "core/engine.h"
#include "policies/demand/demand.h"

namespace umlab {
namespace {

class HandDrivenBackend final : public Backend {
 public:
  explicit HandDrivenBackend(bool makes_room_for_faults)
      : makes_room_for_faults_(makes_room_for_faults) {}

  std::string name() const override { return "hand"; }
  absl::Status Run(EventSource&, Engine&, EventSink*) override { return absl::OkStatus(); }
  void SetListener(TransferListener* listener) override { listener_ = listener; }
  size_t FetchFaults(absl::Span<FaultEntry> out) override {
    size_t n = 0;
    while (n < out.size() && !faults_.empty()) {
      out[n++] = faults_.front();
      faults_.erase(faults_.begin());
    }
    return n;
  }
  void Migrate(const Transfer& transfer) override { migrations.push_back(transfer); }
  void Evict(const Transfer& transfer) override { evictions.push_back(transfer); }
  void Invalidate(BlockNumber, const PageMask&) override {}
  PageUse QueryUse(BlockNumber) const override { return PageUse{PageMask(), PageMask()}; }
  void Replay(ReplayPolicy, BlockNumber, Nanos) override {}
  Nanos Now() const override { return 0; }
  bool MakesRoomFor(TransferKind arrival) const override {
    return makes_room_for_faults_ && arrival == TransferKind::kFaultMigration;
  }

  // A read fault on the first page of `block`, then the engine services it
  // and the migration lands.
  void FaultAndLand(Engine& engine, BlockNumber block) {
    faults_.push_back(FaultEntry{FirstPageOfBlock(block), AccessType::kRead, 0, 1, 0});
    engine.ServiceFaults();
    for (const std::vector<Transfer>* issued : {&migrations, &evictions}) {
      for (const Transfer& t : *issued) {
        if (landed_.insert(t.id).second) listener_->OnTransferComplete(t.id);
      }
    }
  }

  std::vector<Transfer> migrations;
  std::vector<Transfer> evictions;

 private:
  bool makes_room_for_faults_;
  TransferListener* listener_ = nullptr;
  std::vector<FaultEntry> faults_;
  absl::flat_hash_set<TransferId> landed_;
};

EngineConfig Checked() {
  EngineConfig config;
  config.check_invariants = true;
  return config;
}

TEST(DeviceEvictions, AnEngineThatMustMakeRoomEvictsItsOwnVictim) {
  HandDrivenBackend backend(/*makes_room_for_faults=*/false);
  DemandPolicy policy;
  Engine engine(backend, policy, /*capacity_frames=*/1, Checked());
  backend.FaultAndLand(engine, 0);
  backend.FaultAndLand(engine, 1);
  ASSERT_EQ(backend.evictions.size(), 1u);
  EXPECT_EQ(backend.evictions[0].block, 0u);
  EXPECT_EQ(engine.memory_state().used_frames(), 1u);
  EXPECT_EQ(engine.stats().device_evictions, 0u);
  EXPECT_TRUE(engine.invariant_status().ok()) << engine.invariant_status();
}

TEST(DeviceEvictions, ADeviceThatMakesRoomIsFollowedNotSecondGuessed) {
  HandDrivenBackend backend(/*makes_room_for_faults=*/true);
  DemandPolicy policy;
  Engine engine(backend, policy, /*capacity_frames=*/1, Checked());
  backend.FaultAndLand(engine, 0);
  backend.FaultAndLand(engine, 1);
  // The device has evicted a block of its choosing to bring block 1 in; the
  // engine must not evict another one for the same arrival.
  EXPECT_TRUE(backend.evictions.empty());
  EXPECT_EQ(backend.migrations.size(), 2u);
  EXPECT_EQ(engine.memory_state().used_frames(), 2u);  // until the report arrives
  engine.OnDeviceEvicted(0);
  EXPECT_EQ(engine.memory_state().used_frames(), 1u);
  EXPECT_EQ(engine.stats().device_evictions, 1u);
  EXPECT_EQ(engine.stats().evictions, 1u);
  const BlockState* block0 = engine.memory_state().Find(0);
  ASSERT_NE(block0, nullptr);
  EXPECT_FALSE(block0->has_frame);
  // A report for a block the engine no longer holds changes nothing.
  engine.OnDeviceEvicted(0);
  EXPECT_EQ(engine.stats().device_evictions, 1u);
  EXPECT_TRUE(engine.invariant_status().ok()) << engine.invariant_status();
}

}  // namespace
}  // namespace umlab
