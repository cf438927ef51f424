// The C functions python/umlab_torch calls through ctypes: one session per
// process, started before the training allocates and reported at its end.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "backends/cuda/torch/torch_session.h"

namespace {

std::unique_ptr<umlab::cuda::TorchSession> session;
// Block events come from PyTorch's allocator on any thread, and may keep
// coming after the session ends: they and the session's end take turns.
std::mutex session_mutex;
std::string last_error;
std::string last_report;

}  // namespace

extern "C" {

// 0 on success; otherwise umlab_torch_error() says why, in one line.
// `policy` is a policy spec for the live engine, or "" for the driver alone.
// `record` non-zero records the training as a program (its access sets and
// kernel times); `record_path`, when not empty, is where the .umt goes, and
// `workload` names it.
int umlab_torch_start(int gpu, unsigned long long capacity_bytes,
                      unsigned long long host_limit_bytes, const char* policy, int record,
                      const char* record_path, const char* workload) {
  if (session != nullptr) {
    last_error = "umlab_torch: a session is already running in this process";
    return 1;
  }
  umlab::cuda::TorchSessionOptions options;
  options.gpu = gpu;
  options.capacity_bytes = capacity_bytes;
  options.host_limit_bytes = host_limit_bytes;
  options.policy = policy == nullptr ? "" : policy;
  options.record = record != 0;
  options.record_path = record_path == nullptr ? "" : record_path;
  options.workload = workload == nullptr ? "" : workload;
  absl::StatusOr<std::unique_ptr<umlab::cuda::TorchSession>> started =
      umlab::cuda::TorchSession::Start(options);
  if (!started.ok()) {
    last_error = std::string(started.status().message());
    return 1;
  }
  session = std::move(*started);
  return 0;
}

const char* umlab_torch_error() { return last_error.c_str(); }

// PyTorch's caching allocator's trace (python/umlab_torch/block_trace.py
// attaches it): `action` is c10's TraceEntry::Action. A block handed out
// (ALLOC, 0) is live; one whose free completed (FREE_COMPLETED, 2) is back
// in the cache, its bytes garbage until handed out again.
void umlab_torch_block_event(int action, unsigned long long address, unsigned long long bytes) {
  constexpr int kAlloc = 0, kFreeCompleted = 2;
  if (action != kAlloc && action != kFreeCompleted) return;
  std::lock_guard<std::mutex> lock(session_mutex);
  if (session != nullptr) session->OnBlock(action == kAlloc, address, bytes);
}

void umlab_torch_mark_iteration() {
  if (session != nullptr) session->MarkIteration();
}

// The report as JSON ("" without a session); ends the session, releasing the
// balloon.
const char* umlab_torch_stop() {
  if (session == nullptr) return "";
  last_report = session->Report();
  std::lock_guard<std::mutex> lock(session_mutex);
  session.reset();
  return last_report.c_str();
}

}  // extern "C"
