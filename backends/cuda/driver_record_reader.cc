#include "backends/cuda/driver_record_reader.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "core/block_range.h"
#include "core/memory_units.h"

namespace umlab::cuda {

DriverRecordReader::DriverRecordReader(bool driver_evicts, ToProgram to_program)
    : driver_evicts_(driver_evicts), to_program_(std::move(to_program)) {}

absl::Status DriverRecordReader::OpenLog(const std::string& path) {
  // Times in ns since the run's start on CUPTI's clock; -1 where CUPTI
  // gives none. program_address is -1 outside the program's memory.
  // delivered_ns: when the engine thread took the record; outcome: what a
  // driver eviction did to the engine's books (ApplyDriverEviction), or
  // "left" for a fault record older than its block's last eviction.
  return OpenCsvLog(
      path, "records",
      "kind,cause,address,program_address,value,start_ns,end_ns,delivered_ns,outcome\n", log_);
}

void DriverRecordReader::Start(uint64_t cupti_start) {
  cupti_start_ = cupti_start;
  iteration_starts_.clear();
  bins_.assign(1, Bin{});
}

void DriverRecordReader::MarkIteration(uint64_t cupti_timestamp) {
  iteration_starts_.push_back(cupti_timestamp);
  bins_.push_back(Bin{});
}

size_t DriverRecordReader::BinOf(uint64_t cupti_timestamp) const {
  // Bin 0 holds what happened before the first iteration marker.
  const size_t bin = static_cast<size_t>(
      std::upper_bound(iteration_starts_.begin(), iteration_starts_.end(), cupti_timestamp) -
      iteration_starts_.begin());
  return std::min(bin, bins_.size() - 1);
}

void DriverRecordReader::NoteRefill(BlockNumber block, uint64_t cupti_timestamp) {
  refilled_at_[block] = cupti_timestamp;
}

const char* DriverRecordReader::ApplyDriverEviction(Engine& engine, BlockNumber block,
                                                    const PageMask& pages, uint64_t began_ns) {
  // Read after the policy refilled the block: it tells of pages the engine
  // has seen come back, not of the pages there now.
  if (auto refilled = refilled_at_.find(block);
      refilled != refilled_at_.end() && refilled->second > began_ns) {
    ++stale_evictions_;
    return "stale";
  }
  const BlockState* state = engine.memory_state().Find(block);
  if (state == nullptr || !state->has_frame) return "not_resident";
  // The engine's own transfer of the block is under way (Engine::OnDeviceEvicted).
  if (state->transfers_in_flight > 0) return "in_flight";
  if (pages.all()) {
    engine.OnDeviceEvicted(block);
    return "applied";
  }
  if ((state->resident & pages).none()) return "not_resident";
  engine.OnDevicePagesEvicted(block, pages);
  return "applied";
}

void DriverRecordReader::CountTransfer(const UnifiedMemoryRecord& record,
                                       const std::optional<uint64_t>& address) {
  const bool to_device = record.kind == UnifiedMemoryRecord::Kind::kBytesHostToDevice;
  Bin& bin = bins_[BinOf(record.start_ns)];
  (to_device ? bin.h2d : bin.d2h) += record.value;
  if (record.cause == UnifiedMemoryRecord::Cause::kUser) {
    (to_device ? call_h2d_ : call_d2h_) += record.value;
  }
  if (address.has_value()) ledger_.Note(record.start_ns, *address, record.value, to_device);
}

void DriverRecordReader::CountTrailing(const std::vector<UnifiedMemoryRecord>& records) {
  for (const UnifiedMemoryRecord& record : records) {
    if (record.kind != UnifiedMemoryRecord::Kind::kBytesHostToDevice &&
        record.kind != UnifiedMemoryRecord::Kind::kBytesDeviceToHost) {
      continue;
    }
    const std::optional<uint64_t> address = to_program_(record.address);
    CountTransfer(record, address);
    Log(record, address, 0, "trailing");
  }
}

bool DriverRecordReader::LeftSince(BlockNumber block, uint64_t time_ns) const {
  auto left = left_at_.find(block);
  return left != left_at_.end() && left->second > time_ns;
}

void DriverRecordReader::Log(const UnifiedMemoryRecord& record,
                             const std::optional<uint64_t>& program, uint64_t delivered_ns,
                             const char* outcome) {
  if (log_ == nullptr) return;
  std::fprintf(log_.get(), "%s,%s,0x%llx,%lld,%llu,%lld,%lld,%lld,%s\n", KindName(record.kind),
               CauseName(record.cause), static_cast<unsigned long long>(record.address),
               program.has_value() ? static_cast<long long>(*program) : -1LL,
               static_cast<unsigned long long>(record.value), LogTime(record.start_ns, cupti_start_),
               LogTime(record.end_ns, cupti_start_), LogTime(delivered_ns, cupti_start_), outcome);
}

uint64_t DriverRecordReader::Read(
    std::vector<UnifiedMemoryRecord>& records, Engine& engine, FaultBuffer& faults,
    uint32_t exec_id, Nanos now,
    const std::function<void(uint64_t program_address, uint64_t start_ns)>& on_fault) {
  // In time order, so that the driver's evictions reach the engine before
  // the faults that caused them are serviced.
  std::stable_sort(records.begin(), records.end(),
                   [](const UnifiedMemoryRecord& a, const UnifiedMemoryRecord& b) {
                     return a.start_ns < b.start_ns;
                   });
  // Each block once, in the order first heard, with when it was last heard
  // of arriving (records are in time order).
  std::vector<std::pair<BlockNumber, uint64_t>> faulted;
  absl::flat_hash_map<BlockNumber, size_t> seen;  // its index in `faulted`
  auto arrived = [&](BlockNumber block, uint64_t time_ns) {
    auto [it, inserted] = seen.try_emplace(block, faulted.size());
    if (inserted) {
      faulted.emplace_back(block, time_ns);
    } else {
      faulted[it->second].second = time_ns;
    }
  };
  // A fault, from either source, tells of an arrival unless the driver has
  // begun evicting its block since; returns the log's outcome.
  auto fault_heard = [&](BlockNumber block, uint64_t time_ns) -> const char* {
    if (LeftSince(block, time_ns)) return "left";
    arrived(block, time_ns);
    return "";
  };
  // Every block a transfer record's bytes cover.
  auto for_each_block = [](uint64_t address, uint64_t bytes, auto&& visit) {
    const BlockNumber last = BlockOfAddress(address + bytes - 1);
    for (BlockNumber block = BlockOfAddress(address); block <= last; ++block) visit(block);
  };
  const uint64_t delivered = log_ != nullptr ? CuptiFaultStream::Timestamp() : 0;
  for (const UnifiedMemoryRecord& record : records) {
    Bin& bin = bins_[BinOf(record.start_ns)];
    const std::optional<uint64_t> address = to_program_(record.address);
    // Each record is logged once, with what it did to the books.
    switch (record.kind) {
      case UnifiedMemoryRecord::Kind::kThrashing:
        ++thrashing_detections_;
        Log(record, address, delivered, "");
        continue;
      case UnifiedMemoryRecord::Kind::kThrottling:
        if (record.end_ns > record.start_ns) throttled_ns_ += record.end_ns - record.start_ns;
        Log(record, address, delivered, "");
        continue;
      case UnifiedMemoryRecord::Kind::kBytesHostToDevice:
        CountTransfer(record, address);
        // The driver brought these in by itself (for a fault, or by its
        // prefetcher around one). A fault record names one address of its
        // group, so a group that spans blocks is seen only here; the
        // engine's own prefetches (cause user) it knows of already.
        if (address.has_value() && record.value > 0 &&
            record.cause != UnifiedMemoryRecord::Cause::kUser) {
          for_each_block(*address, record.value, [&](BlockNumber block) {
            if (LeftSince(block, record.start_ns)) return;
            // A block the engine holds in part is news: the driver filled
            // the rest.
            const BlockState* state = engine.memory_state().Find(block);
            if (state == nullptr || !state->ExpectsNoNewsOfACopy()) arrived(block, record.start_ns);
          });
        }
        Log(record, address, delivered, "");
        continue;
      case UnifiedMemoryRecord::Kind::kBytesDeviceToHost: {
        CountTransfer(record, address);
        const char* outcome = "";
        if (address.has_value() && record.value > 0 &&
            record.cause == UnifiedMemoryRecord::Cause::kCoherence) {
          // The CPU touched pages on the GPU (a host kernel) and the driver
          // took exactly those back: in either memory mode, the engine's
          // books must lose them, and only them.
          ForEachBlockRange(*address, record.value, false,
                            [&](BlockNumber block, const PageMask& pages) {
                              outcome = ApplyDriverEviction(engine, block, pages, record.start_ns);
                            });
        } else if (driver_evicts_ && address.has_value() && record.value > 0 &&
                   record.cause != UnifiedMemoryRecord::Cause::kUser) {
          // The driver's own evictions; what the engine evicted comes back
          // with cause user and the engine has let go of it already.
          for_each_block(*address, record.value, [&](BlockNumber block) {
            outcome = ApplyDriverEviction(engine, block, FullPageMask(), record.start_ns);
            uint64_t& left = left_at_[block];
            left = std::max(left, record.start_ns);
          });
        }
        Log(record, address, delivered, outcome);
        continue;
      }
      case UnifiedMemoryRecord::Kind::kBytesDeviceToDevice:
        Log(record, address, delivered, "");  // a stream for one GPU sees none
        continue;
      case UnifiedMemoryRecord::Kind::kFaultEvent: {
        // One fault the driver serviced, told by its own queue within a poll.
        const char* outcome = "";
        if (address.has_value()) {
          ++fault_events_;
          outcome = faults_from_events_ ? fault_heard(BlockOfAddress(*address), record.start_ns)
                                        : "counted";
        }
        Log(record, address, delivered, outcome);
        continue;
      }
      case UnifiedMemoryRecord::Kind::kGpuPageFault:
        break;
    }
    if (!address.has_value()) {  // not the program's memory
      Log(record, address, delivered, "");
      continue;
    }
    ++fault_records_;
    bin.faults += record.value;
    if (on_fault) on_fault(*address, record.start_ns);
    if (faults_from_events_) {  // the queue's fault events tell the engine
      Log(record, address, delivered, "counted");
      continue;
    }
    // A fault record comes through CUPTI, late; where the driver's own queue
    // has told of the block's eviction since, the arrival it reports is over.
    Log(record, address, delivered, fault_heard(BlockOfAddress(*address), record.start_ns));
  }
  // A record names one faulting address of a group, and the driver's own
  // prefetcher populates around it, often the whole 2 MB block. So that the
  // engine's residency (and with it the budget and what an eviction moves
  // back) covers what the driver really brought in, every page of the block
  // is reported as faulted. CUPTI does not say which SM faulted or whether
  // it wrote.
  uint64_t arriving = 0;
  for (const auto& [block, heard_at] : faulted) {
    // The driver began evicting it after, in this same read: over.
    if (LeftSince(block, heard_at)) continue;
    const BlockState* state = engine.memory_state().Find(block);
    if (state == nullptr || !state->has_frame) ++arriving;
    const PageNumber first = FirstPageOfBlock(block);
    for (int page = 0; page < kPagesPerBlock; ++page) {
      faults.Push(FaultEntry{first + page, AccessType::kRead, 0, exec_id, now});
    }
  }
  return arriving;
}

void DriverRecordReader::FillStatistics(RunStats& stats) const {
  stats.fault_records = fault_records_;
  stats.fault_events = fault_events_;
  stats.thrashing_detections = thrashing_detections_;
  stats.throttled_ns = static_cast<Nanos>(throttled_ns_);
  stats.stale_eviction_records = stale_evictions_;
  stats.call_h2d_bytes = call_h2d_;
  stats.call_d2h_bytes = call_d2h_;
  stats.unrecorded_d2h_bytes = ledger_.UnrecordedDepartureBytes();
  uint64_t faults = 0, h2d = 0, d2h = 0;
  for (const Bin& bin : bins_) {
    faults += bin.faults;
    h2d += bin.h2d;
    d2h += bin.d2h;
  }
  // The contract's fault and traffic numbers are what CUPTI measured; the
  // engine's own requests stay in fault_migrated_bytes and prefetch_bytes.
  stats.faults = faults;
  stats.h2d_bytes = h2d;
  stats.d2h_bytes = d2h;
  for (size_t i = 0; i < stats.per_iteration.size() && i + 1 < bins_.size(); ++i) {
    stats.per_iteration[i].faults = bins_[i + 1].faults;
    stats.per_iteration[i].h2d_bytes = bins_[i + 1].h2d;
    stats.per_iteration[i].d2h_bytes = bins_[i + 1].d2h;
  }
}

}  // namespace umlab::cuda
