// A program's copies as the sim and the uffd backend run them
// (core/copy_command.h): those that are DMA transfers or hidden copies, on
// the one stream they share with the program's kernels. (A copy the policy
// runs as a host access is a host kernel of no duration: the backends run
// it without this.)
//
// The stream's order:
// - A DMA copy starts once every copy before it is done, and takes the
//   link once, at the copy rate. A synchronous one holds the host.
// - A hidden copy (HUM) starts once the copies before it have started, no
//   copy under way writes its destination, and the policy agrees
//   (Policy::StartsCopy). Starting, its destination awaits it on the
//   engine (Engine::AwaitCopy) and its chunks, one per 2 MB block of the
//   destination, queue for the staging threads (Policy::CopyThreads, each
//   at DeviceConfig::host_stage_bytes_per_second slowed by the contention
//   of the threads busy when it starts). A staged chunk joins its copy's migration queue, and the
//   one migration thread moves a chunk at a time (Engine::LandCopy),
//   taking the queue the policy names (Policy::NextCopyToMigrate). The copy
//   is done when its last chunk has landed. The host never waits for it
//   but through the protection below.
// - A host write to the source of a host-to-device copy that is not done
//   waits for it (HUM write-protects the source until its copy lands).
// - A kernel launches once every DMA copy before it is done and every
//   hidden copy before it has started with its destination off the device
//   (so none of its pages is mapped until its copy lands it: no blank
//   page), and, when the command just before it is a hidden copy not done,
//   once that is done or the policy lets it go first
//   (Policy::LaunchesEarly).
// - A hidden copy also waits for the copies before it that write its source
//   (a device-to-host copy into the host buffer it reads), and a host
//   access of a buffer that a DMA copy not done reads or writes waits for
//   it (a read of a DMA copy's source need not): stream order, as the
//   bytes must show it.
//
// What the stream decides is the same on every backend; how the bytes move
// is the backend's. Without a Mover (the sim) a DMA copy is a transfer on
// the sim's link and a staged chunk is done at its modelled time; with one
// (the uffd backend) the Mover copies real bytes on real threads and tells
// the stream when they are done (OnTransfersComplete, OnChunkStaged).
#ifndef UMLAB_BACKENDS_EMU_COPY_STREAM_H_
#define UMLAB_BACKENDS_EMU_COPY_STREAM_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/copy_command.h"
#include "core/device_config.h"
#include "core/engine.h"
#include "core/event.h"
#include "emu/device_memory.h"
#include "emu/pcie_link.h"

namespace umlab {

class CopyStream {
 public:
  // Moves the copies' real bytes (the uffd backend). Called under the
  // lock that guards the stream and the engine.
  class Mover {
   public:
    virtual ~Mover() = default;
    // A copy to the device is issued (DMA or hidden): its source must not
    // change until Done.
    virtual void Issued(CopyId id, const CopyCommand& copy) = 0;
    // DMA copy `id` starts; the stream hears that it is done through
    // OnTransfersComplete with the id returned.
    virtual TransferId StartDma(CopyId id, const CopyCommand& copy) = 0;
    // A staging thread takes chunk `chunk` of hidden copy `id`: `bytes` of
    // the source at `source` into the destination's host memory at
    // `destination`, taking at least `modelled` ns of modelled time; the
    // stream hears it through OnChunkStaged.
    virtual void Stage(CopyId id, size_t chunk, uint64_t destination, uint64_t source,
                       uint64_t bytes, Nanos modelled) = 0;
    // Copy `id` is done (issued to the device: see Issued).
    virtual void Done(CopyId id, const CopyCommand& copy) = 0;
  };

  // The sim: DMA copies on `link`, staging on the modelled clock.
  CopyStream(const DeviceConfig& device, PcieLink& link) : device_(device), link_(&link) {}
  // A backend that moves real bytes.
  CopyStream(const DeviceConfig& device, Mover& mover) : device_(device), mover_(&mover) {}

  // The engine whose pages the copies move, and whose policy decides.
  void Bind(Engine* engine) { engine_ = engine; }

  // The program issues copy `id` (its number among the program's copies),
  // to run as `mode` (kDma or kHidden), at `now`.
  absl::Status Issue(CopyId id, const CopyCommand& copy, CopyMode mode, Nanos now);
  // The host waits: a synchronous DMA copy is not done.
  bool HoldsHost() const { return sync_dma_live_ > 0; }
  // Every copy is done (cudaDeviceSynchronize).
  bool AllDone() const { return live_.empty(); }
  // A host write of [address, address+size) must wait: it overlaps the
  // source of a host-to-device copy that is not done.
  bool Protects(uint64_t address, uint64_t size) const;
  // A host access of [address, address+size) must wait for a DMA copy not
  // done: it reads or writes the copy's destination, or (`write`) writes
  // its source.
  bool DmaTouches(uint64_t address, uint64_t size, bool write) const;
  // Whether kernel `exec_id`, touching `accesses`, may launch now; sets
  // `early` when it goes before the copy just before it is done.
  absl::StatusOr<bool> MayLaunch(uint32_t exec_id, absl::Span<const Event> accesses,
                                 bool& early);
  // A kernel launched: it is the command before the next one.
  void NoteKernelLaunched() { last_copy_.reset(); }

  // When a staging thread next finishes (kNever when none is busy).
  Nanos NextEventTime() const;
  // Staging threads that finish at `now` hand their chunks on.
  absl::Status ProcessStagingAt(Nanos now);
  // With a Mover: a staging thread finished chunk `chunk` of copy `id`.
  absl::Status OnChunkStaged(CopyId id, size_t chunk, Nanos now);
  // Link transfers that completed at `now`: DMA copies and the migration
  // thread's landings among them move their copies on; the engine's other
  // transfers may let staging or landings go on.
  absl::Status OnTransfersComplete(absl::Span<const TransferId> completed, Nanos now);

  // The referee of the blank-page race: no page that a hidden copy has yet
  // to land is mapped on the device. The sim asks at every kernel begin.
  absl::Status CheckNoBlankPages(const DeviceMemory& device) const;

 private:
  // The part of a hidden copy's destination in one 2 MB block.
  struct Chunk {
    BlockNumber block = 0;
    PageMask pages;
    uint64_t address = 0;
    uint64_t bytes = 0;
  };
  struct Copy {
    CopyCommand command;
    CopyMode mode = CopyMode::kDma;
    bool started = false;
    TransferId dma = 0;          // DMA: its transfer on the link
    std::vector<Chunk> chunks;   // hidden: in address order
    std::deque<size_t> staged;   // hidden: its migration queue
    size_t landed = 0;           // hidden: chunks on the device
  };
  struct Staging {
    CopyId copy;
    size_t chunk;
  };

  // Starts what can start, stages what can be staged and lands what can
  // land, until nothing more moves.
  absl::Status Pump(Nanos now);
  bool StartNext(Nanos now);
  bool StageNext(Nanos now);
  absl::StatusOr<bool> LandNext();
  void Finish(CopyId id);
  // The time one staging thread takes for `bytes` while `busy` threads
  // stage (it among them). A chunk keeps the rate it starts with.
  Nanos StagingTime(uint64_t bytes, size_t busy) const;

  const DeviceConfig& device_;
  PcieLink* link_ = nullptr;  // without a Mover
  Mover* mover_ = nullptr;
  Engine* engine_ = nullptr;

  // Issued and not done, in program order.
  std::map<CopyId, Copy> live_;
  int sync_dma_live_ = 0;
  // The command before the next one, when it is a copy.
  std::optional<CopyId> last_copy_;
  // DMA transfers on the link, from an id range of their own.
  TransferId next_dma_ = TransferId{1} << 60;
  absl::flat_hash_map<TransferId, CopyId> dma_copies_;
  // Staging: chunks waiting for a thread, in the order their copies
  // started, and those being staged by finishing time (a multimap keeps
  // ties in the order they started).
  std::deque<Staging> to_stage_;
  std::multimap<Nanos, Staging> staging_;
  // With a Mover: chunks its staging threads hold.
  size_t staging_by_mover_ = 0;
  // The migration thread: the landing it waits for (0: idle).
  TransferId landing_ = 0;
  CopyId landing_copy_ = 0;
};

}  // namespace umlab

#endif  // UMLAB_BACKENDS_EMU_COPY_STREAM_H_
