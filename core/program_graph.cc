#include "core/program_graph.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace umlab {
namespace {

// The program events a graph is made of, without the names that make Event
// large: a long trace is held whole while it is read.
struct SlimEvent {
  EventKind kind;
  AccessType access;
  uint8_t cause;  // kActivate: the tensor's role (core/tensor_role.h)
  uint32_t rereads;
  uint32_t exec_id;
  uint64_t address;
  uint64_t size;
  uint64_t iteration;
  Nanos duration_ns;
};

class GraphBuilder {
 public:
  // `tensor_begin` and `tensor_end` are the events that open and close a
  // tensor: kActivate/kDeactivate, or kAlloc/kFree for a program without
  // activations.
  GraphBuilder(EventKind tensor_begin, EventKind tensor_end)
      : tensor_begin_(tensor_begin), tensor_end_(tensor_end) {}

  void Add(const SlimEvent& event) {
    if (event.kind == EventKind::kIterationBegin) {
      BeginIteration(event.iteration);
    } else if (event.kind == tensor_begin_) {
      Open(event.address, event.size, RoleOf(event));
    } else if (event.kind == tensor_end_) {
      Close(event.address, event.size);
    } else if (event.kind == EventKind::kKernelBegin) {
      if (current_ == nullptr) BeginIteration(0);
      GraphKernel kernel;
      kernel.exec_id = event.exec_id;
      kernel.duration_ns = event.duration_ns;
      current_->kernels.push_back(std::move(kernel));
      in_kernel_ = true;
    } else if (event.kind == EventKind::kKernelEnd) {
      if (in_kernel_) Normalize(current_->kernels.back());
      in_kernel_ = false;
    } else if (event.kind == EventKind::kAccess && in_kernel_) {
      Access(event);
    }
  }

  ProgramGraph Finish() {
    if (in_kernel_) Normalize(current_->kernels.back());
    EndIteration();
    return std::move(graph_);
  }

 private:
  struct Active {
    uint64_t end;
    uint32_t tensor;  // index in the current iteration
    std::optional<TensorRole> role;
  };
  // A tensor the current iteration found active when it began, and that
  // has ended since: after how many of the iteration's kernels began.
  struct Inherited {
    uint32_t tensor;
    size_t kernels_begun;
  };

  void BeginIteration(uint64_t index) {
    if (in_kernel_) Normalize(current_->kernels.back());
    in_kernel_ = false;
    EndIteration();
    graph_.iterations.emplace_back();
    current_ = &graph_.iterations.back();
    current_->index = index;
    // What is active already is the new iteration's too, in address order.
    for (auto& [address, active] : active_) {
      active.tensor = static_cast<uint32_t>(current_->tensors.size());
      current_->tensors.push_back(GraphTensor{address, active.end - address, false, active.role});
    }
    inherited_ = current_->tensors.size();
  }

  void EndIteration() {
    if (current_ == nullptr) return;
    for (const auto& [address, active] : active_) current_->tensors[active.tensor].global = true;
    // One the iteration found active and that ended only after its last
    // kernel began is global too: the program's teardown, not a death
    // within the iteration.
    for (const Inherited& ended : inherited_ended_) {
      if (ended.kernels_begun >= current_->kernels.size()) {
        current_->tensors[ended.tensor].global = true;
      }
    }
    inherited_ended_.clear();
    current_ = nullptr;
  }

  static std::optional<TensorRole> RoleOf(const SlimEvent& slim) {
    Event event;
    event.kind = slim.kind;
    event.cause = slim.cause;
    return RoleOfActivation(event);
  }

  void Open(uint64_t address, uint64_t size, std::optional<TensorRole> role) {
    if (size == 0) return;
    // A range that overlaps an active one ends it: allocators hand out
    // disjoint ranges, so only a damaged trace gets here.
    Close(address, size);
    uint32_t index = 0;
    if (current_ != nullptr) {
      index = static_cast<uint32_t>(current_->tensors.size());
      current_->tensors.push_back(GraphTensor{address, size, false, role});
    }
    active_[address] = Active{address + size, index, role};
  }

  // Ends every active tensor that overlaps [address, address + size).
  void Close(uint64_t address, uint64_t size) {
    auto it = FirstOverlap(address);
    while (it != active_.end() && it->first < address + size) {
      if (current_ != nullptr && it->second.tensor < inherited_) {
        inherited_ended_.push_back(Inherited{it->second.tensor, current_->kernels.size()});
      }
      it = active_.erase(it);
    }
  }

  std::map<uint64_t, Active>::iterator FirstOverlap(uint64_t address) {
    auto it = active_.upper_bound(address);
    if (it != active_.begin() && std::prev(it)->second.end > address) --it;
    return it;
  }

  void Access(const SlimEvent& event) {
    GraphKernel& kernel = current_->kernels.back();
    kernel.page_visits += PagesSpanned(event.address, event.size);
    uint64_t covered = 0;
    const uint64_t end = event.address + event.size;
    for (auto it = FirstOverlap(event.address); it != active_.end() && it->first < end; ++it) {
      const uint64_t from = std::max(event.address, it->first);
      const uint64_t bytes = std::min(end, it->second.end) - from;
      // Every pass over the bytes counts: what they cost to move from memory
      // that is not the device's (Event::rereads).
      const TensorTouch touch{bytes * (uint64_t{event.rereads} + 1),
                              PagesSpanned(from, bytes)};
      if (event.rereads > 0) kernel.reread.push_back(it->second.tensor);
      covered += bytes;
      if (event.access != AccessType::kWrite) {
        kernel.reads.push_back(it->second.tensor);
        kernel.read_touches.push_back(touch);
      }
      if (event.access != AccessType::kRead) {
        kernel.writes.push_back(it->second.tensor);
        kernel.write_touches.push_back(touch);
      }
    }
    current_->untracked_access_bytes += event.size - covered;
  }

  static void Normalize(GraphKernel& kernel) {
    std::sort(kernel.reread.begin(), kernel.reread.end());
    kernel.reread.erase(std::unique(kernel.reread.begin(), kernel.reread.end()),
                        kernel.reread.end());
    Merge(kernel.reads, kernel.read_touches);
    Merge(kernel.writes, kernel.write_touches);
  }

  // Sorts the tensors a kernel touched and adds up the touches of each.
  static void Merge(std::vector<uint32_t>& tensors, std::vector<TensorTouch>& touches) {
    std::vector<std::pair<uint32_t, TensorTouch>> each;
    each.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) each.emplace_back(tensors[i], touches[i]);
    std::stable_sort(each.begin(), each.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    tensors.clear();
    touches.clear();
    for (const auto& [tensor, touch] : each) {
      if (!tensors.empty() && tensors.back() == tensor) {
        touches.back().bytes += touch.bytes;
        touches.back().page_visits += touch.page_visits;
      } else {
        tensors.push_back(tensor);
        touches.push_back(touch);
      }
    }
  }

  const EventKind tensor_begin_;
  const EventKind tensor_end_;
  ProgramGraph graph_;
  IterationGraph* current_ = nullptr;
  bool in_kernel_ = false;
  std::map<uint64_t, Active> active_;  // by start address
  size_t inherited_ = 0;  // the current iteration's tensors [0, inherited_) were active at its start
  std::vector<Inherited> inherited_ended_;
};

}  // namespace

absl::StatusOr<ProgramGraph> ReadProgramGraph(EventSource& program) {
  std::vector<SlimEvent> events;
  absl::flat_hash_map<uint32_t, std::string> names;
  absl::flat_hash_set<uint32_t> host_kernels;
  bool has_activations = false;
  Event event;
  while (program.Next(event)) {
    if (event.kind == EventKind::kKernelDefine) {
      names[event.exec_id] = event.name;
      if (event.cause == static_cast<uint8_t>(KernelPlace::kHost)) {
        host_kernels.insert(event.exec_id);
      }
      continue;
    }
    if (!event.IsProgramEvent()) continue;
    has_activations |= event.kind == EventKind::kActivate;
    events.push_back(SlimEvent{event.kind, event.access, event.cause, event.rereads,
                               event.exec_id, event.address, event.size, event.iteration,
                               event.duration_ns});
  }
  if (!program.status().ok()) return program.status();
  GraphBuilder builder(has_activations ? EventKind::kActivate : EventKind::kAlloc,
                       has_activations ? EventKind::kDeactivate : EventKind::kFree);
  for (const SlimEvent& slim : events) builder.Add(slim);
  ProgramGraph graph = builder.Finish();
  graph.kernel_names = std::move(names);
  graph.tensors_open_with = has_activations ? EventKind::kActivate : EventKind::kAlloc;
  if (!host_kernels.empty()) {
    for (IterationGraph& iteration : graph.iterations) {
      for (GraphKernel& kernel : iteration.kernels) {
        kernel.on_host = host_kernels.contains(kernel.exec_id);
      }
    }
  }
  return graph;
}

}  // namespace umlab
